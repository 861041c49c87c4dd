#!/sbin/sh
#
# SMF method for svc:/site/zonewright/agent:default (zonewright-agent.xml).
# Installed as /opt/zonewright/lib/svc/method/zonewright-agent.
#
# start: reads the instance's `config` property group, turns every non-empty
# property into a flag (config/pod_cidr -> --pod-cidr VALUE) and execs
# `zonewright agent` in the foreground: the service's duration is child, so
# this process becomes the agent and svc.startd restarts it when it exits.
#
# stop: sends SIGTERM to the agent's process only (restarter/start_pid; the
# start method exec'd the agent, so that is its pid) and waits for it to
# exit. The agent then stops polling, lets running activities finish (up to
# config/shutdown_timeout) and exits 0. Unlike :kill, host commands the
# agent runs at that moment are not signalled, so the drain lets them
# complete. svc.startd bounds this method with its timeout_seconds.

. /lib/svc/share/smf_include.sh

ZONEWRIGHT=/opt/zonewright/bin/zonewright

# The config properties, one per flag of `zonewright agent`.
PROPS='
node
api_url
state_dir
join_token_file
listen
advertise_address
api_ca
cluster_domain
dns_upstream
temporal_address
temporal_namespace
temporal_tls_cert
temporal_tls_key
temporal_tls_ca
temporal_tls_server_name
temporal_insecure
pod_cidr
etherstub
storage_pool
zones_dataset
zones_path
zones_dir
zone_brands
images_dataset
volumes_dataset
image_dir
zvol_dir
max_pods
system_reserved_cpu
system_reserved_memory
zone_quota
zone_max_processes
zone_max_lwps
bin_dir
max_concurrent_installs
heartbeat_interval
reconcile_interval
node_route_interval
orphan_grace
provision_retry
shutdown_timeout
log_level
'

# getprop NAME prints config/NAME, or nothing when it is unset or empty.
# svcprop prints an empty string as "" and escapes shell metacharacters
# with a backslash; both are undone here.
getprop() {
	_v=`/usr/bin/svcprop -p "config/$1" "$SMF_FMRI" 2>/dev/null` || return 0
	[ "$_v" = '""' ] && return 0
	printf '%s\n' "$_v" | /usr/bin/sed 's/\\\(.\)/\1/g'
}

# stop_agent sends SIGTERM to the agent and waits until it has exited.
stop_agent() {
	pid=`/usr/bin/svcprop -p restarter/start_pid "$SMF_FMRI" 2>/dev/null`
	case "$pid" in
	''|*[!0-9]*)
		exit $SMF_EXIT_OK	# not running
		;;
	esac
	kill -TERM "$pid" 2>/dev/null || exit $SMF_EXIT_OK
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
	done
	exit $SMF_EXIT_OK
}

case "$1" in
start)
	;;
stop)
	if [ -z "$SMF_FMRI" ]; then
		echo "zonewright-agent: SMF_FMRI is not set: run me through SMF" >&2
		exit $SMF_EXIT_ERR_NOSMF
	fi
	stop_agent
	;;
*)
	echo "zonewright-agent: unknown method \"$1\" (start or stop)" >&2
	exit $SMF_EXIT_ERR_CONFIG
	;;
esac

if [ -z "$SMF_FMRI" ]; then
	echo "zonewright-agent: SMF_FMRI is not set: run me through SMF" >&2
	exit $SMF_EXIT_ERR_NOSMF
fi

if ! smf_is_globalzone; then
	echo "zonewright-agent: the agent runs in the global zone only" >&2
	exit $SMF_EXIT_ERR_CONFIG
fi

if [ ! -x "$ZONEWRIGHT" ]; then
	echo "zonewright-agent: $ZONEWRIGHT is missing or not executable" >&2
	exit $SMF_EXIT_ERR_CONFIG
fi

for p in api_url; do
	if [ -z "`getprop $p`" ]; then
		echo "zonewright-agent: config/$p is empty; set it with" >&2
		echo "  svccfg -s $SMF_FMRI setprop config/$p = astring: VALUE" >&2
		echo "  svcadm refresh $SMF_FMRI; svcadm clear $SMF_FMRI" >&2
		exit $SMF_EXIT_ERR_CONFIG
	fi
done

# Build the argument list in "$@", one word per flag and one per value, so
# that no value (a URL with ? & =, a path with spaces) is split or
# expanded again.
set -- agent
for p in $PROPS; do
	v=`getprop $p`
	[ -n "$v" ] || continue
	case $p in
	temporal_insecure)	# a boolean flag takes its value in the same word
		set -- "$@" "--temporal-insecure=$v" ;;
	*)
		set -- "$@" "--`echo $p | /usr/bin/tr _ -`" "$v" ;;
	esac
done

smf_clear_env
exec "$ZONEWRIGHT" "$@"
