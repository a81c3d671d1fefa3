"""The HTTP/JSON gateway: the spec's HTTP routes, transcoded to the gRPC services."""
