"""The trail of people: logins, failed logins and logouts; users and groups made, changed and
deleted; who is in which group, and the permissions of users and groups.

Django's own signals are the hook here: these changes are made by Django's auth, the admin and any
code that calls ``user.groups.add``, not by actions of ours. Who made a change is the user of the
request in progress (``audit.middleware``), else "system". Entries about a user are named by their
user name (``job_name``), so a user sees their own (``scheduler_site.audit_api``); a failed login
names the user name tried, never the password.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from . import trail
from .models import Action, Source, Subject

USER_FIELDS = ("username", "first_name", "last_name", "email", "is_active", "is_staff", "is_superuser", "password")
HIDDEN = "•••"


def _record(subject, name, action, changes=None, detail=""):
    user, actor_name, source, address = trail.current_actor()
    trail.record_about(subject, name, action, source, actor_name=actor_name, user=user, address=address,
                       changes=changes, detail=detail)


# --- logins


def _source(request):
    return trail.source_of(request) if request is not None else Source.SYSTEM


def logged_in(sender, request, user, **kwargs):
    trail.record_about(Subject.USER, user.get_username(), Action.LOGIN, _source(request),
                       actor_name=user.get_username(), user=user, address=trail.client_address(request))


def login_failed(sender, credentials, request=None, **kwargs):
    # Only the name tried: Django hides the password in ``credentials``, and it never is read here.
    tried = str(credentials.get(get_user_model().USERNAME_FIELD) or credentials.get("username") or "")
    trail.record_about(Subject.USER, tried, Action.LOGIN_FAILED, _source(request), actor_name=tried,
                       address=trail.client_address(request))


def logged_out(sender, request, user, **kwargs):
    if user is not None:
        trail.record_about(Subject.USER, user.get_username(), Action.LOGOUT, _source(request),
                           actor_name=user.get_username(), user=user, address=trail.client_address(request))


# --- users and groups


def _user_values(user):
    return {name: getattr(user, name) for name in USER_FIELDS}


def _diff(before, after):
    changes = {}
    for name in after:
        old, new = before.get(name), after[name]
        if old != new:
            changes[name] = [old, new]
    if "password" in changes:  # that it was set or changed, never the hash
        had = bool(before.get("password"))
        changes["password"] = [HIDDEN if had else None, f"{HIDDEN} (changed)" if had else HIDDEN]
    return changes


def user_saving(sender, instance, raw=False, update_fields=None, **kwargs):
    instance._audit_before = None
    if raw or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return  # a login's last_login is the login's entry, not a change
    instance._audit_before = ({} if instance._state.adding
                              else sender.objects.filter(pk=instance.pk).values(*USER_FIELDS).first() or {})


def user_saved(sender, instance, created, raw=False, **kwargs):
    before = getattr(instance, "_audit_before", None)
    if raw or before is None:
        return
    changes = _diff(before, _user_values(instance))
    if changes:
        _record(Subject.USER, instance.get_username(), Action.CREATE if created else Action.CHANGE, changes)


def user_deleted(sender, instance, **kwargs):
    _record(Subject.USER, instance.get_username(), Action.DELETE, {"username": [instance.get_username(), None]})


def group_saving(sender, instance, raw=False, **kwargs):
    instance._audit_before = (None if raw else {} if instance._state.adding
                              else Group.objects.filter(pk=instance.pk).values("name").first() or {})


def group_saved(sender, instance, created, raw=False, **kwargs):
    before = getattr(instance, "_audit_before", None)
    if raw or before is None:
        return
    changes = _diff(before, {"name": instance.name})
    if changes:
        _record(Subject.GROUP, instance.name, Action.CREATE if created else Action.CHANGE, changes)


def group_deleted(sender, instance, **kwargs):
    _record(Subject.GROUP, instance.name, Action.DELETE, {"name": [instance.name, None]})


# --- memberships and permissions: {field: [the names before, the names after]} of each user or group


def _permission_name(permission):
    return f"{permission.content_type.app_label}.{permission.codename}"


def _relations():
    """{through model: (the owner's model, its field, its subject, how to name a related row)}."""
    User = get_user_model()
    return {
        User.groups.through: (User, "groups", Subject.USER, lambda group: group.name),
        User.user_permissions.through: (User, "user_permissions", Subject.USER, _permission_name),
        Group.permissions.through: (Group, "permissions", Subject.GROUP, _permission_name),
    }


def _name_of(row):
    return row.get_username() if hasattr(row, "get_username") else getattr(row, "name", str(row))


def _names(owner, field, name):
    related = getattr(owner, field).all()
    if field != "groups":
        related = related.select_related("content_type")
    return sorted(name(row) for row in related)


def relation_changed(sender, instance, action, reverse, model, pk_set, **kwargs):
    relation = _relations().get(sender)
    if relation is None or action not in ("pre_clear", "post_add", "post_remove", "post_clear"):
        return
    owner_model, field, subject, name = relation
    if action == "pre_clear":  # what is about to go, for post_clear
        instance._audit_cleared = (
            [(owner, _names(owner, field, name)) for owner in getattr(instance, _reverse_name(owner_model, sender)).all()]
            if reverse else [(instance, _names(instance, field, name))])
        return
    if action == "post_clear":
        for owner, before in getattr(instance, "_audit_cleared", []):
            after = _names(owner, field, name)
            if before != after:
                _record(subject, _name_of(owner), Action.CHANGE, {field: [before, after]})
        return
    if not pk_set:
        return
    if reverse:  # group.user_set.add(user): each user named in pk_set gained or lost the group
        owners, moved = owner_model.objects.filter(pk__in=pk_set), {name(instance)}
    else:
        owners = [instance]
        rows = model.objects.filter(pk__in=pk_set)
        moved = {name(row) for row in (rows.select_related("content_type") if model is Permission else rows)}
    for owner in owners:
        after = _names(owner, field, name)
        before = sorted(set(after) - moved) if action == "post_add" else sorted(set(after) | moved)
        if before != after:
            _record(subject, _name_of(owner), Action.CHANGE, {field: [before, after]})


def _reverse_name(owner_model, through):
    """The accessor on the related row that lists its owners (``group.user_set``, ``permission.group_set``)."""
    for field in owner_model._meta.many_to_many:
        if field.remote_field.through is through:
            return field.remote_field.get_accessor_name()
    raise LookupError(through)


def connect():
    User = get_user_model()
    user_logged_in.connect(logged_in, dispatch_uid="audit-login")
    user_login_failed.connect(login_failed, dispatch_uid="audit-login-failed")
    user_logged_out.connect(logged_out, dispatch_uid="audit-logout")
    pre_save.connect(user_saving, sender=User, dispatch_uid="audit-user-saving")
    post_save.connect(user_saved, sender=User, dispatch_uid="audit-user-saved")
    post_delete.connect(user_deleted, sender=User, dispatch_uid="audit-user-deleted")
    pre_save.connect(group_saving, sender=Group, dispatch_uid="audit-group-saving")
    post_save.connect(group_saved, sender=Group, dispatch_uid="audit-group-saved")
    post_delete.connect(group_deleted, sender=Group, dispatch_uid="audit-group-deleted")
    for through in _relations():
        m2m_changed.connect(relation_changed, sender=through, dispatch_uid=f"audit-{through._meta.label}")
