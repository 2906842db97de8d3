"""Inside the training: save configs, collections, reductions, the framework hooks and profilers."""
