#!/usr/bin/env bash
# Set up and start the whole service on the embedded defaults: web (http://127.0.0.1:8000/admin/, or
# WEB_BIND), a worker, beat (the scheduler) and Flower (http://127.0.0.1:5555, or FLOWER_PORT), with
# SQLite and a Redis of its own (on 127.0.0.1:6380, or QUICKSTART_REDIS_PORT, with a password).
# Ctrl-C stops all four. With --no-start it sets up (the same steps) and stops before starting them.
# var/ holds the database, the keys and the passwords: 0700, its files 0600 (and the service's
# processes write with umask 077 themselves, scheduler_site/process.py).
set -euo pipefail
cd "$(dirname "$0")/.."
(umask 077 && mkdir -p var)
chmod 700 var
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
umask 077

# The quick start's Redis: on 127.0.0.1 only, with a password made once and kept in var/ (redis.conf
# for the server, redis_url for the service; the settings read it when CELERY_BROKER_URL and
# REDIS_URL are unset), so that no other local user or process reaches the broker. Left running
# when the service stops, as a daemon; `redis-cli -p PORT -a PASSWORD shutdown` stops it.
if [ -z "${CELERY_BROKER_URL:-}${REDIS_URL:-}" ]; then
  command -v redis-server >/dev/null || { echo "redis-server is not installed (apt install redis-server)" >&2; exit 1; }
  if [ ! -s var/redis.conf ] || [ ! -s var/redis_url ]; then
    port="${QUICKSTART_REDIS_PORT:-6380}"
    password="$(.venv/bin/python -c "import secrets; print(secrets.token_hex(32))")"
    cat > var/redis.conf <<CONF
bind 127.0.0.1
protected-mode yes
port $port
requirepass $password
daemonize yes
pidfile $PWD/var/redis.pid
logfile $PWD/var/redis.log
dir $PWD/var
save ""
appendonly no
CONF
    echo "redis://:$password@127.0.0.1:$port/0" > var/redis_url
  fi
  chmod 600 var/redis.conf var/redis_url
  redis_port="$(sed -n 's/^port //p' var/redis.conf)"
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null; then
    echo "starting the quick start's Redis on 127.0.0.1:$redis_port"
    redis-server var/redis.conf
  fi
fi

# Secrets: taken from the environment, or made once for this checkout and kept in var/ (not in git),
# where the settings find them when the variable is unset: manage.py works in any shell here.
[ -s var/secret_key ] || .venv/bin/python -c "import secrets; print(secrets.token_urlsafe(50))" > var/secret_key
[ -s var/admin_password ] || .venv/bin/python -c "import secrets; print(secrets.token_urlsafe(12))" > var/admin_password
[ -s var/secrets_key ] || .venv/bin/python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())" > var/secrets_key
[ -s var/metrics_token ] || .venv/bin/python -c "import secrets; print(secrets.token_urlsafe(24))" > var/metrics_token
chmod 600 var/secret_key var/admin_password var/secrets_key var/metrics_token
export SECRET_KEY="${SECRET_KEY:-$(cat var/secret_key)}"
export JOBS_SECRETS_KEYS="${JOBS_SECRETS_KEYS:-$(cat var/secrets_key)}"
export METRICS_TOKEN="${METRICS_TOKEN:-$(cat var/metrics_token)}"
# Plain http on 127.0.0.1: no HTTPS-only cookies, HSTS or redirect (on by default with DEBUG off).
export HTTPS="${HTTPS:-false}"
export ADMIN_USER="${ADMIN_USER:-admin}"
export ADMIN_PASSWORD="${ADMIN_PASSWORD:-$(cat var/admin_password)}"
export FLOWER_BASIC_AUTH="${FLOWER_BASIC_AUTH:-$ADMIN_USER:$ADMIN_PASSWORD}"
export PYTHONUNBUFFERED=1

.venv/bin/python manage.py migrate --noinput -v 0
.venv/bin/python manage.py collectstatic --noinput -v 0
.venv/bin/python manage.py shell -c "
import os
from django.contrib.auth import get_user_model
User = get_user_model()
user, created = User.objects.get_or_create(username=os.environ['ADMIN_USER'], defaults={'is_staff': True, 'is_superuser': True})
if created:
    user.set_password(os.environ['ADMIN_PASSWORD']); user.save()
" >/dev/null

# Where the Procfile's web and Flower listen (WEB_BIND, FLOWER_PORT), as addresses to open: a
# server bound to every interface is reached on 127.0.0.1 here.
WEB_BIND="${WEB_BIND:-127.0.0.1:8000}"
FLOWER_PORT="${FLOWER_PORT:-5555}"
export WEB_BIND FLOWER_PORT
web_host="${WEB_BIND%:*}"
case "$web_host" in 0.0.0.0|"["*"]"|"") web_host=127.0.0.1 ;; esac
WEB_URL="http://$web_host:${WEB_BIND##*:}"
FLOWER_URL="http://127.0.0.1:$FLOWER_PORT"

banner() {
  cat <<TXT

  Job scheduler $1
    admin:  $WEB_URL/admin/   user: $ADMIN_USER   password: $ADMIN_PASSWORD
    pages:  $WEB_URL/
    API:    $WEB_URL/api/  (docs: /api/docs/)
    Flower: $FLOWER_URL/         (same user and password)
    /metrics: Authorization: Bearer $METRICS_TOKEN
TXT
}

if [ "${1:-}" = "--no-start" ]; then
  banner "is set up; scripts/quickstart.sh starts it at:"
  exit 0
fi

banner "is starting."
printf '  Ctrl-C stops web, worker, beat and Flower.\n\n'
exec .venv/bin/honcho start -f Procfile
