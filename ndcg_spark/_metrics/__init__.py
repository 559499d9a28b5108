"""The metric registry: every metric declared once, with its name, what it reads, its per-user
expression and how the summary aggregates it; scoring, beyond accuracy, the summary, the
console, the report, MLflow, the gates and compare read the declarations from here.
"""
