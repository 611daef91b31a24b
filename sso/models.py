from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models


class Identity(models.Model):
    """A user made by single sign-on: the provider's subject they sign on as, and the teams that
    sign-on joined them to (the only ones it takes away again). A local account has no identity, so
    signing on can never take it over."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity")
    issuer = models.CharField(max_length=255, help_text="The ID token's iss.")
    subject = models.CharField(max_length=255, help_text="The ID token's sub: stable for a person at the provider.")
    managed_groups = models.ManyToManyField(
        Group, blank=True, related_name="+",
        help_text="Teams joined because the groups claim named them; left when it no longer does.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_on = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique_subject")]

    def __str__(self):
        return f"{self.user} ({self.subject})"
