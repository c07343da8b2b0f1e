"""What the tests start and wait for: ports, child processes (daphne, uvicorn,
Celery workers, a private Redis) and the browser. Fixtures live in the
directories' conftests; these are the plain helpers they are made of."""
