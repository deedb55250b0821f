"""One module per resource: ``textures`` (upload, info, delete, select and its renderings), ``system``
(health, metrics)."""
