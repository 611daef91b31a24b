"""A person's account and teams from the provider's claims."""

import logging
import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.actions.permissions import COMMAND_RUNNERS_GROUP

from .models import Identity

log = logging.getLogger(__name__)

# Django's own rule for user names (UnicodeUsernameValidator), and the longest name a group may have.
USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")
GROUP_NAME_MAX = Group._meta.get_field("name").max_length


class SignOnRefused(Exception):
    """The provider vouched for someone this service will not let in; the message says why, for them."""


def sign_on(issuer, claims, token_claims=None):
    """The user the provider's ``claims`` (its userinfo answer) stand for, made on their first sign-on,
    with their name, e-mail and teams brought up to date. ``token_claims``: the ID token's, where the
    groups claim is looked for when the userinfo answer has none."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 255:
        raise SignOnRefused("The identity provider sent no usable subject (sub) for this person.")
    try:
        with transaction.atomic():
            identity = _identity(issuer, subject, claims)
    except IntegrityError:
        # The same person's first sign-on in two tabs at once: the other one made the account.
        with transaction.atomic():
            identity = _identity(issuer, subject, claims, create=False)
    groups_claim = claims.get(settings.OIDC_GROUPS_CLAIM)
    if groups_claim is None and token_claims:
        groups_claim = token_claims.get(settings.OIDC_GROUPS_CLAIM)
    with transaction.atomic():
        set_teams(identity, team_names(groups_claim))
        _update_details(identity.user, claims)
        Identity.objects.filter(pk=identity.pk).update(last_sign_on=timezone.now())
    return identity.user


def _identity(issuer, subject, claims, create=True):
    identity = (Identity.objects.select_related("user").select_for_update()
                .filter(issuer=issuer, subject=subject).first())
    if identity is not None:
        return identity
    if not create:
        raise SignOnRefused("Signing on failed; try again.")
    username = username_from(claims)
    User = get_user_model()
    if User.objects.filter(username__iexact=username).exists():
        # A local account (or another provider subject's) of that name: never taken over.
        log.warning("single sign-on refused subject %s of %s: an account named %s exists (manage.py sso link)",
                    subject, issuer, username)
        raise SignOnRefused(
            f"An account named '{username}' already exists here and was not made by single sign-on, so "
            "signing on cannot use it. Ask an administrator: they may link it to you (manage.py sso link) or "
            "rename it.")
    user = User.objects.create_user(username, email=_email(claims))  # no password: set_unusable_password
    log.info("single sign-on made the account %s for subject %s", username, subject)
    return Identity.objects.create(user=user, issuer=issuer, subject=subject)


def username_from(claims):
    """``preferred_username``, else the e-mail address, as long as Django takes it as a user name."""
    for claim in ("preferred_username", "email"):
        value = claims.get(claim)
        if isinstance(value, str) and USERNAME.match(value.strip()):
            return value.strip()
    raise SignOnRefused("The identity provider sent neither a preferred_username nor an email usable as a "
                        "user name (letters, digits and @ . + - _, at most 150).")


def _email(claims):
    email = claims.get("email")
    return email.strip()[:254] if isinstance(email, str) else ""


def _update_details(user, claims):
    changed = {}
    for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
        value = claims.get(claim)
        if isinstance(value, str):
            value = value.strip()[:user._meta.get_field(field).max_length]
            if getattr(user, field) != value:
                changed[field] = value
    if changed:
        for field, value in changed.items():
            setattr(user, field, value)
        user.save(update_fields=list(changed))


def protected_groups():
    """Groups a claim never grants: they carry more than a team's rights."""
    return {COMMAND_RUNNERS_GROUP, *settings.OIDC_PROTECTED_GROUPS}


def team_names(groups_claim):
    """The team names a groups claim stands for: a list of names (or one name), the protected ones and
    the unusable ones left out."""
    if isinstance(groups_claim, str):
        groups_claim = [groups_claim]
    if not isinstance(groups_claim, list | tuple):
        return set()
    names = {name.strip() for name in groups_claim if isinstance(name, str)}
    names = {name for name in names if name and len(name) <= GROUP_NAME_MAX}
    refused = names & protected_groups()
    if refused:
        log.warning("single sign-on: the groups claim names protected groups, not granted: %s", sorted(refused))
    return names - refused


def set_teams(identity, names):
    """Joins the teams named (making those missing) and leaves those that signing on joined before and
    that are no longer named. Teams given in the admin are left alone, and so are protected groups."""
    user = identity.user
    managed = {group.name: group for group in identity.managed_groups.all()}
    current = set(user.groups.values_list("name", flat=True))
    joined = []
    for name in sorted(names - current):
        group, _ = Group.objects.get_or_create(name=name)
        joined.append(group)
    left = [group for name, group in managed.items() if name not in names]
    if joined:
        user.groups.add(*joined)
        identity.managed_groups.add(*joined)
    if left:
        user.groups.remove(*left)
        identity.managed_groups.remove(*left)
    if joined or left:
        log.info("single sign-on: %s joined %s, left %s", user.username,
                 [g.name for g in joined], [g.name for g in left])
