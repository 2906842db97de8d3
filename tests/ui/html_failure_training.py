"""A training that fails at once, its error output carrying HTML: a page must show it as text."""

import sys

print("<img src=x onerror=\"document.title='pwned'\"><b>bold</b>", file=sys.stderr)
sys.exit(3)
