"""The service's packages for setuptools (pyproject.toml holds the rest): every package of its apps, and
the checkout's templates/ shipped as scheduler_site/templates (settings.TEMPLATES looks in both)."""

from setuptools import find_packages, setup

APPS = ["scheduler_site", "jobs", "notifications", "workflows", "audit", "sso", "outbound"]

setup(
    packages=[*find_packages(include=[name for app in APPS for name in (app, f"{app}.*")]), "scheduler_site.templates"],
    package_dir={"scheduler_site.templates": "templates"},
)
