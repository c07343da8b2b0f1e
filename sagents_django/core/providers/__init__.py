"""Model providers shipped with sagents-django, registered with litellm on demand.

Nothing here imports litellm at import time; call a module's ``register_*`` function
(for example ``demo.register_demo_provider``) before the first model call.
"""
