"""The docs site's generated reference pages (mkdocs.yml's hook, ``docs_hooks/reference.py``): the API from
the OpenAPI schema, every setting from the settings module, the command lines from their own help. Each is
made from the code at build time, so it cannot drift from it."""
