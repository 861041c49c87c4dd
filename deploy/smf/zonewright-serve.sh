#!/sbin/sh
#
# SMF method for svc:/site/zonewright/serve:default (zonewright-serve.xml).
# Installed as /opt/zonewright/lib/svc/method/zonewright-serve.
#
# start: reads the instance's `config` property group, turns every non-empty
# property into a flag (config/database_url -> --database-url VALUE) and
# execs `zonewright serve` in the foreground: the service's duration is
# child, so this process becomes serve and svc.startd restarts it when it
# exits. stop is the manifest's `:kill -15`.

. /lib/svc/share/smf_include.sh

ZONEWRIGHT=/opt/zonewright/bin/zonewright

# The config properties, one per flag of `zonewright serve`.
PROPS='
database_url
listen
state_dir
tls_cert
tls_key
tls_san
client_ca
client_ca_admin
insecure_http
temporal_address
temporal_namespace
temporal_tls_cert
temporal_tls_key
temporal_tls_ca
temporal_tls_server_name
temporal_insecure
image_store
transfer_dir
advertise_url
image_map
encryption_key_file
image_stall_timeout
image_source_dir
image_allow_private_sources
image_max_bytes
insecure_registries
pod_registry_image_ttl
max_pod_registry_images
image_gc_high_threshold
image_gc_low_threshold
node_grace_period
node_eviction_timeout
service_cidr
cluster_cidr
node_cidr_mask_size
dns_listen
cluster_domain
dns_upstream
capacity
audit_log
max_connections
max_unauthenticated_connections
min_request_timeout
streaming_connection_idle_timeout
max_watches_per_identity
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

case "$1" in
start)
	;;
*)
	echo "zonewright-serve: unknown method \"$1\" (only start; stop is :kill)" >&2
	exit $SMF_EXIT_ERR_CONFIG
	;;
esac

if [ -z "$SMF_FMRI" ]; then
	echo "zonewright-serve: SMF_FMRI is not set: run me through SMF" >&2
	exit $SMF_EXIT_ERR_NOSMF
fi

if [ ! -x "$ZONEWRIGHT" ]; then
	echo "zonewright-serve: $ZONEWRIGHT is missing or not executable" >&2
	exit $SMF_EXIT_ERR_CONFIG
fi

if [ -z "`getprop database_url`" ]; then
	echo "zonewright-serve: config/database_url is empty; set it with" >&2
	echo "  svccfg -s $SMF_FMRI setprop config/database_url = astring: URL" >&2
	echo "  svcadm refresh $SMF_FMRI; svcadm clear $SMF_FMRI" >&2
	exit $SMF_EXIT_ERR_CONFIG
fi

# Build the argument list in "$@", one word per flag and one per value, so
# that no value (a database URL with ? & =, a path with spaces) is split or
# expanded again.
set -- serve
for p in $PROPS; do
	v=`getprop $p`
	[ -n "$v" ] || continue
	case $p in
	database_url)	# it may hold a password: in the environment, which only
			# the daemon's user and root read, not on the command line
		ZW_DATABASE_URL=$v
		export ZW_DATABASE_URL ;;
	insecure_http|temporal_insecure)	# a boolean flag takes its value in the same word
		set -- "$@" "--`echo $p | /usr/bin/tr _ -`=$v" ;;
	*)
		set -- "$@" "--`echo $p | /usr/bin/tr _ -`" "$v" ;;
	esac
done

smf_clear_env
exec "$ZONEWRIGHT" "$@"
