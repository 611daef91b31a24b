from django.apps import AppConfig


class ProviderConfig(AppConfig):
    name = "tests.oidc_provider"
    label = "test_provider"  # "oidc_provider" is django-oidc-provider's
