"""What a turn's tokens cost, from litellm's offline price list.

Prices come from litellm's bundled model cost map (``LITELLM_LOCAL_MODEL_COST_MAP``
keeps it offline), read through ``litellm.cost_per_token``. litellm takes seconds to
import, so it is imported here on first use, never at Django start-up; a worker
already imported it for the model call by the time a run ends.

Unknown is not free: a model the map does not price (a self-hosted model, a test
model such as ``openai/fake-model``) costs ``None``, which a run stores as a NULL
cost and the admin shows as "-". ``Decimal(0)`` means a model priced at zero (the
offline demo model ``sagents/demo`` registers itself in the map as free) or a turn
that used no tokens. Totals sum the priced runs and count the others, so a bill
never silently omits them.

The turn's usage is summed over its model calls and priced at its agent's model:
a call answered by a fallback model is priced at the primary model's rates.
"""

from __future__ import annotations

import logging
from decimal import ROUND_HALF_UP, Decimal

from sagents_django.core import TokenUsage
from sagents_django.models import COST_QUANTUM

logger = logging.getLogger(__name__)


def cost_of(model: str, usage: TokenUsage) -> Decimal | None:
    """The cost in USD of ``usage`` on ``model`` (a litellm model string); None when
    litellm's cost map does not price ``model``. Never raises."""
    if usage.input <= 0 and usage.output <= 0:
        return Decimal(0)
    try:
        from sagents_django.core.transports import import_litellm

        litellm = import_litellm()
        prompt, completion = litellm.cost_per_token(
            model=model,
            prompt_tokens=usage.input,
            completion_tokens=usage.output,
            # Cached tokens are part of the input, billed at the cache-read rate.
            cache_read_input_tokens=min(max(usage.cached_input, 0), usage.input),
        )
    except Exception as exc:
        # litellm raises for a model it does not map (ModelNotMappedError) or
        # whose provider it does not know: not priced.
        logger.debug("No price for model %r: %s", model, exc)
        return None
    try:
        total = Decimal(str(prompt)) + Decimal(str(completion))
    except ArithmeticError:
        return None
    if not total.is_finite() or total < 0:
        return None
    return total.quantize(COST_QUANTUM, rounding=ROUND_HALF_UP)
