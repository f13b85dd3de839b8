"""`rules serve`: the engine as an HTTP service (FastAPI on uvicorn, the `server` extra).

One module per concept: ``settings`` (what the command was given), ``packs`` (the loaded
packs, reloaded atomically), ``problems`` (RFC 9457 errors), ``security`` (bearer token,
loopback), ``limits`` (body size, time limit), ``metrics`` (Prometheus), ``sessions`` (where
a session's attempts are recorded), ``evaluation``/``catalogue``/``admin`` (the routes),
``app`` (the application), ``run`` (uvicorn). The routes are thin over the Python API the
command line uses; no evaluation logic lives here.
"""
