"""One module per `rules` subcommand; each is a thin click command over the API."""
