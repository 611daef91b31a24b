from django.db import migrations, models


def number_duplicate_names(apps, schema_editor):
    """Channels of the same name get " (2)", " (3)"… so that a name is unique (files name channels)."""
    Channel = apps.get_model("notifications", "Channel")
    seen = set(Channel.objects.values_list("name", flat=True).distinct())
    kept = set()
    for channel in Channel.objects.order_by("name", "id"):
        if channel.name not in kept:
            kept.add(channel.name)
            continue
        n = 2
        while f"{channel.name} ({n})"[:200] in seen:
            n += 1
        channel.name = f"{channel.name} ({n})"[:200]
        seen.add(channel.name)
        channel.save(update_fields=["name"])


class Migration(migrations.Migration):

    dependencies = [
        ("notifications", "0003_watchdog"),
    ]

    operations = [
        migrations.RunPython(number_duplicate_names, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="channel",
            name="name",
            field=models.CharField(max_length=200, unique=True),
        ),
    ]
