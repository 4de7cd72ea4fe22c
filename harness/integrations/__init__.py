"""Guards: this project's runtime inside the agent frameworks people use.

``harness.integrations.guard`` is the framework-free core (``ToolGuard``: every tool
call through an ``AsyncRuntime`` under the framework's tool-call id, the VERIFY hint
as the text the model reads, and the model's report back); the modules beside it
wrap one framework's tools each. They import the runtime only, and their framework.
"""
