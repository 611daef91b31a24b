#!/usr/bin/env bash
# Start PostgreSQL, Redis and RabbitMQ when they are installed here but not running (the tests start
# private brokers of their own; the service's RabbitMQ is for CELERY_BROKER_URL=amqp://...).
set -u
if command -v pg_lsclusters >/dev/null 2>&1; then
  if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    echo "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start 2>/dev/null \
      || pg_ctlcluster "$(ls /etc/postgresql | head -1)" main start || true
  fi
fi
if command -v redis-server >/dev/null 2>&1; then
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
  fi
fi
if [ -x /usr/sbin/rabbitmq-server ] && ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  echo "starting RabbitMQ"
  (service rabbitmq-server start >/dev/null 2>&1 || /usr/sbin/rabbitmq-server -detached >/dev/null 2>&1) || true
fi
for _ in $(seq 1 30); do
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
  sleep 0.5
done
exit 0
