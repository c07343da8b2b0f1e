"""Spend budgets over a usage ledger: the Django side of ``core.SpendBudget``."""
