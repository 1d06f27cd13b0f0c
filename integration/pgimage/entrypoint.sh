#!/usr/bin/env bash
# Entrypoint for the locally built PostgreSQL 15 test image (see ./build).
#
# Mimics the parts of the official postgres image's docker-entrypoint.sh that
# testcontainers-go's postgres module relies on:
#   POSTGRES_USER (default postgres), POSTGRES_PASSWORD, POSTGRES_DB (default
#   = user), POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD,
#   /docker-entrypoint-initdb.d/*.{sh,sql,sql.gz},
#   "postgres" / "-flag" first-argument convention.
# On first start it runs a temporary unix-socket-only server for
# initialisation, so "database system is ready to accept connections" is
# logged twice (testcontainers waits for 2 occurrences).
# All logging goes to stdout/stderr (docker logs).
set -Eeuo pipefail

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*" >&2; }

# "postgres -c x=y" or "-c x=y" => run the server; anything else is exec'd as is.
if [ "$#" -eq 0 ] || [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
if [ "$1" != 'postgres' ]; then
	exec "$@"
fi

# --- running as root: fix up directories, then re-exec as the postgres user.
if [ "$(id -u)" = '0' ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres /var/run/postgresql
	chmod 3777 /var/run/postgresql
	# only touch PGDATA ownership if it is not already ours (mounted volumes)
	if [ "$(stat -c %u "$PGDATA")" != "$(id -u postgres)" ]; then
		chown -R postgres:postgres "$PGDATA"
	fi
	chmod 700 "$PGDATA"
	# setpriv (util-linux) execs directly, no extra process: the server
	# ends up as PID 1 and receives docker's stop signal itself.
	exec setpriv --reuid=postgres --regid=postgres --init-groups \
		env HOME=/var/lib/postgresql "$BASH_SOURCE" "$@"
fi

# --- running as postgres from here on.
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_USER:=postgres}"
	: "${POSTGRES_DB:=$POSTGRES_USER}"
	: "${POSTGRES_PASSWORD:=}"
	: "${POSTGRES_INITDB_ARGS:=}"
	: "${POSTGRES_HOST_AUTH_METHOD:=}"
	export POSTGRES_USER POSTGRES_DB POSTGRES_PASSWORD

	if [ -z "$POSTGRES_HOST_AUTH_METHOD" ]; then
		if [ -n "$POSTGRES_PASSWORD" ]; then
			POSTGRES_HOST_AUTH_METHOD=scram-sha-256
		else
			POSTGRES_HOST_AUTH_METHOD=trust
			log "WARNING: POSTGRES_PASSWORD not set; host connections use 'trust' auth"
		fi
	fi

	log "initialising database cluster in $PGDATA (user=$POSTGRES_USER db=$POSTGRES_DB auth=$POSTGRES_HOST_AUTH_METHOD)"
	initdb_args=(--username="$POSTGRES_USER" --auth-local=trust --auth-host=trust)
	# The <(...) must be on the initdb command line itself: bash closes a
	# process substitution's fd once the command it appears in finishes.
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is intentionally word-split
	if [ -n "$POSTGRES_PASSWORD" ]; then
		initdb "${initdb_args[@]}" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") $POSTGRES_INITDB_ARGS
	else
		initdb "${initdb_args[@]}" $POSTGRES_INITDB_ARGS
	fi

	{
		echo
		echo "# added by docker-entrypoint.sh"
		echo "listen_addresses = '*'"
	} >>"$PGDATA/postgresql.conf"
	if [ "$POSTGRES_HOST_AUTH_METHOD" = md5 ]; then
		echo "password_encryption = md5" >>"$PGDATA/postgresql.conf"
	fi
	# pg_hba: initdb's host rules only cover loopback (and are 'trust'); docker
	# port-forwarded clients come from the bridge gateway, so replace them with
	# one catch-all rule (same as the official image). Local socket stays trust.
	sed -i -E '/^host[[:space:]]/d' "$PGDATA/pg_hba.conf"
	echo "host all all all $POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"

	# temporary server: unix socket only, logs to stderr like the final one.
	log "starting temporary server for initialisation"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start

	psql_base=(psql -v ON_ERROR_STOP=1 --no-password --no-psqlrc -U "$POSTGRES_USER")
	if [ "$POSTGRES_DB" != 'postgres' ]; then
		"${psql_base[@]}" -d postgres --set db="$POSTGRES_DB" <<-'EOSQL'
			CREATE DATABASE :"db" ;
		EOSQL
	fi

	if [ -d /docker-entrypoint-initdb.d ]; then
		for f in /docker-entrypoint-initdb.d/*; do
			[ -e "$f" ] || continue
			case "$f" in
			*.sh)
				if [ -x "$f" ]; then
					log "running $f"
					"$f"
				else
					log "sourcing $f"
					# shellcheck disable=SC1090
					. "$f"
				fi
				;;
			*.sql) log "running $f"; "${psql_base[@]}" -d "$POSTGRES_DB" -f "$f" ;;
			*.sql.gz) log "running $f"; gunzip -c "$f" | "${psql_base[@]}" -d "$POSTGRES_DB" ;;
			*) log "ignoring $f" ;;
			esac
		done
	fi

	log "stopping temporary server"
	pg_ctl -D "$PGDATA" -m fast -w stop
	log "initialisation complete; starting server"
fi

exec "$@"
