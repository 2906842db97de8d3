"""The HTTP server behind ``trainprobe serve``: the job operations in SageMaker's JSON protocol
(``http_api``), who may call and what they may send (``api_app``, ``request_signature``,
``access_key``), served by uvicorn on one address (``api_server``)."""
