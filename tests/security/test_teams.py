"""Teams: a member of another team (the outsider, group "others", holding every channel permission)
neither sees, names, changes nor deletes team A's limit, calendar, channel and rule (those of the
owner, group "team"), through the API, the pages and the command line: another's answers 404, and
naming it answers 400 on the field, as one that does not exist would. Shared ones are seen and
used by everyone and changed by staff alone; only staff mark one shared."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.definitions.jobs import save_job
from jobs.models import Calendar, Job, Limit
from notifications.models import Channel, Rule

from ..test_notifications_support import grant_channel_permissions
from ..work_trail import work_entries
from .conftest import member_of

WEBHOOK = {"url": "https://example.invalid/hook"}


@pytest.fixture
def outsider(people):
    return grant_channel_permissions(people.outsider)


@pytest.fixture
def team_a(people, owned_job):
    mine = {"owner": people.owner, "group": people.team}
    channel = Channel.objects.create(name="a-chan", kind="webhook", config=WEBHOOK, **mine)
    return {
        "limit": Limit.objects.create(key="a-limit", max_running=2, **mine),
        "calendar": Calendar.objects.create(name="a-cal", dates=[{"date": "2026-12-24", "label": ""}], **mine),
        "channel": channel,
        "rule": Rule.objects.create(channel=channel, events=["failed"], scope="job", job=owned_job, **mine),
    }


@pytest.fixture
def shared(people):
    return {
        "limit": Limit.objects.create(key="common", max_running=5, shared=True),
        "calendar": Calendar.objects.create(name="holidays", shared=True),
        "channel": Channel.objects.create(name="everyone", kind="webhook", config=WEBHOOK, shared=True),
    }


@pytest.fixture
def outsiders_job(people):
    return save_job(Job(name="outsiders-job", kind="callable", target="builtin.noop", owner=people.outsider,
                        group=people.others), {"type": "manual"})


def state():
    """What the attempts must leave as it is."""
    return (list(Limit.objects.order_by("key").values_list("key", "max_running", "shared")),
            list(Calendar.objects.order_by("name").values_list("name", "dates", "shared")),
            list(Channel.objects.order_by("name").values_list("name", "enabled", "shared")),
            list(Rule.objects.order_by("id").values_list("channel__name", "events", "enabled")),
            work_entries().count())


def paths(objects):
    return {"limit": f"/api/limits/{objects['limit'].key}/", "calendar": f"/api/calendars/{objects['calendar'].name}/",
            "channel": f"/api/channels/{objects['channel'].pk}/",
            **({"rule": f"/api/rules/{objects['rule'].pk}/"} if "rule" in objects else {})}


CHANGES = {"limit": {"max_running": 99}, "calendar": {"dates": []}, "channel": {"enabled": False},
           "rule": {"events": ["failed", "lost"]}}


# --- the API


@pytest.mark.parametrize("kind", ["limit", "calendar", "channel", "rule"])
def test_another_teams_object_answers_404_to_read_change_and_delete(people, outsider, team_a, kind):
    before = state()
    client, path = people.api(outsider), paths(team_a)[kind]
    assert client.get(path).status_code == 404
    assert client.patch(path, CHANGES[kind], format="json").status_code == 404
    assert client.delete(path).status_code == 404
    if kind == "calendar":
        assert client.post(f"{path}import/", "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
                           content_type="text/calendar").status_code == 404
    if kind == "channel":
        assert client.post(f"{path}test/").status_code == 404
    assert state() == before


@pytest.mark.parametrize(("url", "name"), [("/api/limits/", "a-limit"), ("/api/calendars/", "a-cal"),
                                           ("/api/channels/", "a-chan"), ("/api/rules/", "a-chan")])
def test_another_teams_objects_are_left_out_of_the_lists(people, outsider, team_a, shared, url, name):
    text = people.api(outsider).get(url).content.decode()
    assert name not in text
    assert name in people.api(people.teammate).get(url).content.decode()  # the control: team A sees it


def test_a_job_cannot_name_another_teams_limit_or_calendar(people, outsider, team_a, outsiders_job):
    client, path = people.api(outsider), f"/api/jobs/{outsiders_job.pk}/"
    limit = client.patch(path, {"limit_key": "a-limit"}, format="json")
    assert limit.status_code == 400
    assert limit.json()["limit_key"] == ["No limit has the key 'a-limit' that you may use: name your own limit, "
                                         "your team's, or a shared one (/api/limits/)."]
    calendars = client.patch(path, {"calendars": ["a-cal"], "business_days": True}, format="json")
    assert calendars.status_code == 400
    assert "No calendar is named 'a-cal' that you may use" in calendars.json()["calendars"][0]
    outsiders_job.refresh_from_db()
    assert (outsiders_job.limit_key, outsiders_job.calendars) == ("", [])


def test_a_rule_cannot_send_to_another_teams_channel(people, outsider, team_a, outsiders_job):
    before = state()
    answer = people.api(outsider).post("/api/rules/", {"channel": team_a["channel"].pk, "events": ["failed"],
                                                       "scope": "job", "job": outsiders_job.pk}, format="json")
    assert answer.status_code == 400
    assert list(answer.json()) == ["channel"]
    assert state() == before


def test_shared_ones_are_named_and_used_but_changed_by_staff_only(people, outsider, shared, outsiders_job):
    client = people.api(outsider)
    named = client.patch(f"/api/jobs/{outsiders_job.pk}/", {"limit_key": "common", "calendars": ["holidays"],
                                                            "business_days": True}, format="json")
    assert named.status_code == 200, named.json()
    rule = client.post("/api/rules/", {"channel": shared["channel"].pk, "events": ["failed"], "scope": "job",
                                       "job": outsiders_job.pk}, format="json")
    assert rule.status_code == 201, rule.json()
    assert (rule.json()["owner"], Rule.objects.get().owner) == ("outsider", people.outsider)
    before = state()
    for kind, path in paths(shared).items():
        assert client.get(path).status_code == 200, kind
        assert client.patch(path, CHANGES[kind], format="json").status_code == 403, kind
        assert client.delete(path).status_code == 403, kind
    assert client.post(f"/api/channels/{shared['channel'].pk}/test/").status_code == 403
    assert state() == before
    staff = people.api(grant_channel_permissions(people.staff))
    assert staff.patch(paths(shared)["limit"], {"max_running": 6}, format="json").status_code == 200


def test_a_teammate_changes_the_teams_objects(people, team_a):
    grant_channel_permissions(people.teammate)
    client = people.api(people.teammate)
    for kind, path in paths(team_a).items():
        assert client.patch(path, CHANGES[kind], format="json").status_code == 200, kind
    assert Limit.objects.get(key="a-limit").max_running == 99


@pytest.mark.parametrize(("url", "body"), [
    ("/api/limits/", {"key": "mine", "max_running": 1}),
    ("/api/calendars/", {"name": "mine"}),
    ("/api/channels/", {"name": "mine", "kind": "webhook", "config": WEBHOOK}),
])
def test_only_staff_share_and_a_group_must_be_the_users_own(people, outsider, url, body):
    client = people.api(outsider)
    for extra, field in [({"shared": True}, "shared"), ({"shared": "maybe"}, "shared"),
                         ({"group": "team"}, "group"), ({"group": "no-such-team"}, "group")]:
        answer = client.post(url, {**body, **extra}, format="json")
        assert answer.status_code == 400, (extra, answer.content)
        assert field in answer.json(), (extra, answer.json())
    assert not work_entries().exists()
    made = client.post(url, {**body, "group": "others"}, format="json")
    assert made.status_code == 201, made.json()
    assert (made.json()["owner"], made.json()["group"], made.json()["shared"]) == ("outsider", "others", False)
    path = f"{url}{made.json()['id']}/"
    assert client.patch(path, {"shared": True}, format="json").json() == {
        "shared": ["Only staff may share something with everyone."]}
    staff = people.api(grant_channel_permissions(people.staff))
    assert staff.patch(path, {"shared": True}, format="json").json()["shared"] is True


# --- the pages


PAGES = [("get", "/limits/a-limit/edit/"), ("post", "/limits/a-limit/edit/"), ("post", "/limits/a-limit/delete/"),
         ("get", "/calendars/a-cal/"), ("post", "/calendars/a-cal/"), ("post", "/calendars/a-cal/delete/"),
         ("post", "/calendars/a-cal/import/"), ("post", "/channels/{channel}/test/")]


@pytest.mark.parametrize(("method", "url"), PAGES, ids=[f"{m} {u}" for m, u in PAGES])
def test_another_teams_objects_answer_404_on_the_pages(client, people, outsider, team_a, method, url):
    before = state()
    client.force_login(outsider)
    body = {"key": "a-limit", "max_running": "50", "name": "a-cal", "dates": ""} if method == "post" else None
    assert getattr(client, method)(url.format(channel=team_a["channel"].pk), body).status_code == 404
    assert state() == before


def test_the_lists_on_the_pages_leave_another_teams_objects_out(client, people, outsider, team_a, shared):
    client.force_login(outsider)
    for url, theirs, everyones in [("/limits/", "a-limit", "common"), ("/calendars/", "a-cal", "holidays"),
                                   ("/channels/", "a-chan", "everyone"), ("/jobs/new/", "a-limit", "common")]:
        page = client.get(url).content.decode()
        assert theirs not in page and everyones in page, url


def test_the_limits_page_and_api_count_others_jobs_but_do_not_name_them(client, people, owned_job, outsiders_job,
                                                                         shared):
    Job.objects.filter(pk__in=[owned_job.pk, outsiders_job.pk]).update(limit_key="common")
    client.force_login(people.outsider)
    row = client.get("/limits/").content.decode().split('id="limit-common"')[1].split("</tr>")[0]
    assert "outsiders-job" in row and "owners-job" not in row and "<td>2" in row
    answer = people.api(people.outsider).get("/api/limits/common/").json()
    assert (answer["jobs"], answer["job_names"]) == (2, ["outsiders-job"])
    Limit.objects.filter(key="common").update(shared=False, owner=people.outsider)
    refused = people.api(people.outsider).delete("/api/limits/common/")
    assert refused.status_code == 409
    assert refused.json()["detail"] == ("The limit common is named by the job(s) outsiders-job, 1 job(s) of others: "
                                        "change their limit_key before you delete it.")


# --- the command line


def test_the_command_line_as_an_outsider_neither_exports_nor_names_another_teams_objects(people, outsider, team_a,
                                                                                          tmp_path):
    out = StringIO()
    call_command("jobs", "--as", "outsider", "export", "-", stdout=out)
    assert "a-limit" not in out.getvalue() and "a-cal" not in out.getvalue() and "a-chan" not in out.getvalue()
    path = tmp_path / "take.yaml"
    for named, message in [("limit_key: a-limit", "No limit has the key 'a-limit' that you may use"),
                           ("calendars: [a-cal]", "No calendar is named 'a-cal' that you may use")]:
        path.write_text(f"jobs:\n- name: mine\n  kind: callable\n  target: builtin.noop\n  {named}\n"
                        "  schedule: {type: cron, cron: '0 9 * * *'}\n")
        with pytest.raises(CommandError, match=message):
            call_command("jobs", "--as", "outsider", "apply", str(path), stdout=StringIO())
    path.write_text("jobs:\n- name: mine\n  kind: callable\n  target: builtin.noop\n"
                    "rules:\n- {channel: a-chan, events: [failed], scope: job, job: mine}\n")
    with pytest.raises(CommandError, match='no channel named "a-chan"'):
        call_command("jobs", "--as", "outsider", "apply", str(path), stdout=StringIO())
    path.write_text("limits:\n- {key: a-limit, max_running: 50}\njobs: []\n")
    with pytest.raises(CommandError, match="limit with this key already exists"):  # a new one of theirs: taken
        call_command("jobs", "--as", "outsider", "apply", str(path), stdout=StringIO())
    prune = tmp_path / "prune.yaml"
    prune.write_text("limits: []\ncalendars: []\nchannels: []\nrules: []\njobs: []\n")
    call_command("jobs", "--as", "outsider", "apply", "--prune", str(prune), stdout=StringIO())
    assert (Limit.objects.get(key="a-limit").max_running, Calendar.objects.filter(name="a-cal").exists(),
            Channel.objects.filter(name="a-chan").exists(), Rule.objects.count()) == (2, True, True, 1)
    assert not Job.objects.filter(name="mine").exists()


@pytest.mark.timeout(300)
def test_jobsctl_of_another_team_finds_nothing_of_team_a(jobsctl):
    """jobsctl against a live web process, with the outsider's token."""
    from jobs.access import tokens

    owner, outsider = member_of("team", "owner"), member_of("others", "outsider")
    team = owner.groups.get()
    Limit.objects.create(key="a-limit", max_running=2, owner=owner, group=team)
    Calendar.objects.create(name="a-cal", owner=owner, group=team)
    token = tokens.create(outsider)[1]

    shown = jobsctl("limits", "show", "a-limit", token=token)
    assert (shown.returncode, shown.stderr) == (3, "jobsctl: no limit 'a-limit'; jobsctl limits list shows them.\n")
    assert "a-limit" not in jobsctl("limits", "list", token=token).stdout
    changed = jobsctl("limits", "set", "a-limit", "--max-running", "50", token=token)
    assert changed.returncode != 0 and "key" in changed.stderr  # taken: seen as a new limit of theirs
    assert jobsctl("limits", "delete", "a-limit", token=token).returncode == 3
    assert jobsctl("calendars", "show", "a-cal", token=token).returncode == 3
    assert "a-cal" not in jobsctl("calendars", "list", token=token).stdout
    assert Limit.objects.get(key="a-limit").max_running == 2
    assert jobsctl("limits", "show", "a-limit", token=tokens.create(owner)[1]).returncode == 0  # the control


@pytest.mark.postgres("migrating back and forth: SQLite's schema editor refuses it inside the test's transaction")
def test_the_migration_shares_what_existed_and_gives_a_jobs_rule_to_its_team(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("jobs", "0001_squashed_0030_bundle"), ("notifications", "0001_squashed_0007_paused_event")]
    after = [("jobs", "0031_team_ownership"), ("notifications", "0008_team_ownership")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    user, group = old.get_model("auth", "User").objects.create(username="owner"), \
        old.get_model("auth", "Group").objects.create(name="team")
    job = old.get_model("jobs", "Job").objects.create(name="nightly", kind="callable", target="builtin.noop",
                                                      owner_id=user.pk, group_id=group.pk)
    old.get_model("jobs", "Limit").objects.create(key="warehouse", max_running=1)
    old.get_model("jobs", "Calendar").objects.create(name="de-be")
    channel = old.get_model("notifications", "Channel").objects.create(name="ops", kind="webhook", config={})
    rules = old.get_model("notifications", "Rule").objects
    rules.create(channel=channel, events=["failed"], scope="job", job=job)
    rules.create(channel=channel, events=["failed"], scope="all")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        now = executor.loader.project_state(after).apps
        assert list(now.get_model("jobs", "Limit").objects.values_list("key", "shared", "owner")) == [
            ("warehouse", True, None)]
        assert list(now.get_model("jobs", "Calendar").objects.values_list("name", "shared", "owner")) == [
            ("de-be", True, None)]
        assert list(now.get_model("notifications", "Channel").objects.values_list("name", "shared", "owner")) == [
            ("ops", True, None)]
        assert list(now.get_model("notifications", "Rule").objects.order_by("id").values_list(
            "scope", "owner", "group", "enabled", "paused_reason")) == [
            ("job", user.pk, group.pk, True, ""), ("all", None, None, True, "")]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
