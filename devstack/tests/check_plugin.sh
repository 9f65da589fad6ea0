#!/bin/bash
#
# check_plugin.sh - run this devstack plugin's phases on devstack's own
# function library, without devstack, Ironic or systemd.
#
# Usage: devstack/tests/check_plugin.sh DEVSTACK_DIR
#    or: DEVSTACK_DIR=... devstack/tests/check_plugin.sh
#
# DEVSTACK_DIR is a checkout of devstack (any branch); nothing of it is
# kept here. The script sources its "functions" and "lib/apache", sets
# the variables that stack.sh and Ironic's lib/ironic would, writes
# ironic.conf, the uwsgi configuration and the systemd units of ir-api
# and ir-cond with devstack's own functions, as Ironic's plugin has them
# written, and then runs each phase of plugin.sh as stack.sh does
# (sourced, under errexit), checking what it changed.
#
# Stand-ins, for what cannot run here: "openstack", "systemctl" and
# "sudo" are shell functions that record their calls (sudo runs its
# command only when every absolute path it names is in the scratch
# folder); "ironic-affinity" and "ironic-affinity-status", whose live
# commands need Ironic's database, are scripts with canned answers
# (their real argument forms are checked on the installed commands);
# the API is a small local HTTP server that answers 200 or 503 to the
# real curl; Ironic itself is a fake "ironic.conf.api" module with or
# without the [api]middleware option.
#
# The install phase runs for real: setup_develop and pip_install put the
# project into a new virtual environment (network access needed), under
# the constraints file HARNESS_CONSTRAINTS when given. Set HARNESS_VENV
# to an environment where the project is installed already to skip it.
# IRONIC_PYTHONS, a list of Python interpreters with a real Ironic
# installed, adds a check of the [api]middleware detection on each.
#
# Prints one "ok"/"not ok" line per check; exits 1 if any failed.

DEVSTACK_DIR=${1:-${DEVSTACK_DIR:-}}
if [[ ! -f $DEVSTACK_DIR/functions-common ]]; then
    echo "usage: $0 DEVSTACK_DIR (a devstack checkout)" >&2
    exit 2
fi
DEVSTACK_DIR=$(cd "$DEVSTACK_DIR" && pwd)
PLUGIN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROJECT_DIR=$(dirname "$PLUGIN_DIR")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/check-plugin.XXXXXX")
STATE=$WORK/state
CALLS=$WORK/calls.log
mkdir -p "$STATE" "$WORK/bin" "$WORK/etc/ironic" "$WORK/logs"
: > "$CALLS"

FAILED=0
COUNT=0

function ok {
    COUNT=$((COUNT + 1))
    echo "ok $COUNT - $1"
}

function not_ok {
    COUNT=$((COUNT + 1))
    FAILED=$((FAILED + 1))
    echo "not ok $COUNT - $1"
    if [[ -n ${2:-} ]]; then
        sed 's/^/#   /' <<< "$2"
    fi
}

# expect DESCRIPTION COMMAND...: one check, passed when COMMAND succeeds.
function expect {
    local what=$1
    shift
    if "$@"; then
        ok "$what"
    else
        not_ok "$what" "${PHASE_OUT:-}"
    fi
}

function contains {
    [[ $1 == *"$2"* ]]
}

# The API stand-in: answers every GET with the status in $STATE/api_status.
echo 200 > "$STATE/api_status"
python3 -c '
import http.server, sys
state = sys.argv[1]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(state) as f:
            self.send_response(int(f.read().strip()))
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
' "$STATE/api_status" > "$WORK/api_port" &
API_PID=$!
trap 'kill "$API_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [[ -s $WORK/api_port ]] && break
    sleep 0.5
done
API_PORT=$(cat "$WORK/api_port")


# devstack, as stack.sh has it by the time plugins run
# -----------------------------------------------------

source "$DEVSTACK_DIR/functions"

TOP_DIR=$DEVSTACK_DIR
DEST=$WORK/opt
DATA_DIR=$DEST/data
LOGDIR=$WORK/logs
STACK_USER=$(id -un)
SERVICE_HOST=127.0.0.1
SERVICE_LOCAL_HOST=127.0.0.1
SERVICE_PROTOCOL=http
SERVICE_TIMEOUT=4
API_WORKERS=1
WORKER_TIMEOUT=10
KILL_PATH=/bin/kill
SYSTEMD_DIR=$WORK/systemd
SYSTEMCTL=systemctl
GLOBAL_VENV=True
PYTHON3_VERSION=3
ENABLED_SERVICES=etcd3,key,ir-api,ir-cond
REQUIREMENTS_DIR=$WORK/requirements
mkdir -p "$DEST" "$REQUIREMENTS_DIR/.venv/bin"
if [[ -n ${HARNESS_CONSTRAINTS:-} ]]; then
    cp "$HARNESS_CONSTRAINTS" "$REQUIREMENTS_DIR/upper-constraints.txt"
else
    : > "$REQUIREMENTS_DIR/upper-constraints.txt"
fi
# The requirements project's tool, which drops the project being installed
# from the constraints.
cat > "$REQUIREMENTS_DIR/.venv/bin/edit-constraints" <<'EOF'
#!/bin/bash
sed -i "/^$3===/d" "$1"
EOF
chmod +x "$REQUIREMENTS_DIR/.venv/bin/edit-constraints"

if [[ -n ${HARNESS_VENV:-} ]]; then
    DEVSTACK_VENV=$HARNESS_VENV
else
    DEVSTACK_VENV=$WORK/venv
    python3 -m venv "$DEVSTACK_VENV"
fi
PYTHON=$DEVSTACK_VENV/bin/python3

source "$DEVSTACK_DIR/lib/apache"

# Ironic's lib/ironic
IRONIC_CONF_DIR=$WORK/etc/ironic
IRONIC_CONF_FILE=$IRONIC_CONF_DIR/ironic.conf
IRONIC_STATE_PATH=$WORK/var/lib/ironic
IRONIC_SERVICE_PROTOCOL=http
IRONIC_HOSTPORT=127.0.0.1:$API_PORT/baremetal
IRONIC_OS_CLOUD=devstack-system-admin
IRONIC_UWSGI_CONF=$IRONIC_CONF_DIR/ironic-uwsgi.ini
IRONIC_UWSGI=ironic.wsgi:application
# Ironic's commands live in their own folder here, so that the canned
# ironic-affinity commands stand in for the real ones.
IRONIC_BIN_DIR=$WORK/bin

# The plugin, enabled with Ironic's.
enable_plugin ironic https://opendev.org/openstack/ironic
enable_plugin ironic-affinity "$PROJECT_DIR"
# A clone of the committed project: an editable install writes into
# the tree it installs from.
IRONIC_AFFINITY_DIR=$WORK/src
git clone -q "$PROJECT_DIR" "$IRONIC_AFFINITY_DIR"
source "$PLUGIN_DIR/settings"
source "$PLUGIN_DIR/lib/ironic-affinity"


# Stand-ins
# ---------

function record {
    echo "$*" >> "$CALLS"
}

function sudo {
    local arg top
    record "sudo $*"
    for arg in "$@"; do
        # A path outside the scratch folder: its first component exists
        # (a sed script starting with "/" is no path).
        top=${arg#/}
        top=/${top%%/*}
        if [[ $arg == /* && $arg != "$WORK"/* && -e $top ]]; then
            # Leaves the system alone; reads what it was given to write.
            [[ -p /dev/stdin ]] && cat > /dev/null
            return 0
        fi
    done
    case $1 in
        -H | a2ensite | a2dissite | a2enmod | systemd-tmpfiles) return 0 ;;
    esac
    "$@"
}

function systemctl {
    record "systemctl $*"
}

# openstack [--os-cloud C] [--os-baremetal-api-version V] baremetal ...
function openstack {
    local cloud="" version="" node value
    record "openstack $*"
    while [[ $1 == --* ]]; do
        case $1 in
            --os-cloud) cloud=$2 ;;
            --os-baremetal-api-version) version=$2 ;;
        esac
        shift 2
    done
    shift  # baremetal
    case "$1 $2" in
        "conductor list")
            # Ironic's policy: conductors are read with a system scope.
            if [[ $cloud != devstack-system-admin ]]; then
                echo "Forbidden: Forbidden (HTTP 403)" >&2
                return 1
            fi
            cat "$STATE/conductors"
            ;;
        "node list")
            cat "$STATE/nodes"
            ;;
        "node set")
            value=${4#*=}
            node=$5
            local valid='^[A-Za-z0-9._:, -]*$'
            if [[ $(cat "$STATE/api_validates") == 1 && ! $value =~ $valid ]]; then
                echo "Bad Request: invalid affinity tag (HTTP 400)" >&2
                return 1
            fi
            echo "$4" > "$STATE/extra.$node"
            ;;
        "node show")
            node=$3
            echo x >> "$STATE/polls.$node"
            local polls placed=no
            polls=$(wc -l < "$STATE/polls.$node")
            if [[ $version == latest && -f $STATE/extra.$node ]]; then
                if [[ $polls -ge $(cat "$STATE/place_after") ]]; then
                    placed=yes
                fi
            fi
            if [[ $placed == yes ]]; then
                cat "$STATE/placed_on"
            else
                echo None
            fi
            ;;
        *)
            echo "openstack stand-in: $*" >&2
            return 1
            ;;
    esac
}

# Canned ironic-affinity and ironic-affinity-status; each answer and exit
# status comes from $STATE.
for command in ironic-affinity ironic-affinity-status; do
    cat > "$WORK/bin/$command" <<EOF
#!/bin/bash
echo "$command \$*" >> "$CALLS"
case "\$*" in
    *members*) cat "$STATE/members"; exit 0 ;;
    *" check") cat "$STATE/$command.out"; exit \$(cat "$STATE/$command.rc") ;;
esac
echo "unexpected arguments: \$*" >&2
exit 2
EOF
    chmod +x "$WORK/bin/$command"
done

# A fake Ironic of each kind, for the [api]middleware detection.
for kind in with-middleware without-middleware; do
    mkdir -p "$WORK/ironic-$kind/ironic/conf" "$WORK/ironic-$kind/ironic/common"
    touch "$WORK/ironic-$kind/ironic/__init__.py" \
        "$WORK/ironic-$kind/ironic/common/__init__.py"
    # Neither has the change of contrib/ironic/ (an empty hash_ring), so
    # the plugin enables itself through the launcher.
    touch "$WORK/ironic-$kind/ironic/common/hash_ring.py"
    echo "CONF = frozenset(['host'])" > "$WORK/ironic-$kind/ironic/conf/__init__.py"
done
cat > "$WORK/ironic-with-middleware/ironic/conf/api.py" <<'EOF'
class Opt:
    def __init__(self, name):
        self.name = name
opts = [Opt('host_ip'), Opt('middleware')]
EOF
cat > "$WORK/ironic-without-middleware/ironic/conf/api.py" <<'EOF'
class Opt:
    def __init__(self, name):
        self.name = name
opts = [Opt('host_ip')]
EOF
# And one with the change of contrib/ironic/ (and [api]middleware), and
# one with its change A alone: the loader, without the conductor hooks.
for kind in with-hook loader-only; do
    cp -r "$WORK/ironic-with-middleware" "$WORK/ironic-$kind"
    echo "CONF = frozenset(['host', 'hash_ring_manager'])" > "$WORK/ironic-$kind/ironic/conf/__init__.py"
    cat > "$WORK/ironic-$kind/ironic/common/hash_ring.py" <<'EOF'
def get_hash_ring_manager_class():
    pass


class BaseHashRingManager:
    pass
EOF
done
cat >> "$WORK/ironic-with-hook/ironic/common/hash_ring.py" <<'EOF'
BaseHashRingManager.conductor_started = lambda self, host: None
EOF
mkdir -p "$WORK/ironic-broken/ironic"
echo 'raise ImportError("broken")' > "$WORK/ironic-broken/ironic/__init__.py"

# A fresh deployment as Ironic's plugin leaves it at the end of its extra
# phase: ironic.conf, the uwsgi configuration of the API and the two
# systemd units, written with devstack's functions.
# reset_deployment [ir-cond command]
function reset_deployment {
    local cond_command=${1:-$IRONIC_BIN_DIR/ironic-conductor --config-file=$IRONIC_CONF_FILE}
    rm -rf "$SYSTEMD_DIR" "$STATE"/* "$IRONIC_CONF_FILE" "$IRONIC_UWSGI_CONF"
    iniset "$IRONIC_CONF_FILE" DEFAULT host harness-host
    iniset "$IRONIC_CONF_FILE" database connection sqlite://
    write_uwsgi_config "$IRONIC_UWSGI_CONF" "$IRONIC_UWSGI" /baremetal "" \
        ironic-api > /dev/null
    _run_under_systemd ir-cond "$cond_command"
    _run_under_systemd ir-api \
        "/usr/bin/uwsgi --procname-prefix ironic-api --ini $IRONIC_UWSGI_CONF"
    ln -sf "$DEVSTACK_VENV/bin/ironic-affinity-conductor" "$WORK/bin/"
    echo 200 > "$STATE/api_status"
    echo "harness-host True" > "$STATE/conductors"
    echo '[{"name": "harness-host", "alive": true}]' > "$STATE/members"
    printf '%s\n' 1be26c0b-03f2-4d2d-ae87-c02d7f33c123 \
        7c3a1e2f-5b8d-4d0e-9f6a-2b4c6d8e0a11 > "$STATE/nodes"
    echo 2 > "$STATE/place_after"
    echo harness-host > "$STATE/placed_on"
    echo 1 > "$STATE/api_validates"
    echo "No orphaned node" > "$STATE/ironic-affinity.out"
    echo 0 > "$STATE/ironic-affinity.rc"
    echo "Upgrade Check Results: Success" > "$STATE/ironic-affinity-status.out"
    echo 0 > "$STATE/ironic-affinity-status.rc"
    : > "$CALLS"
}

# phase MODE [PHASE]: source plugin.sh as stack.sh does, in a subshell
# (die exits it), under errexit and with stack.sh's trace on standard
# error; output in PHASE_OUT without the trace lines, exit status in
# PHASE_RC. (Without the trace, the harness missed the plugin reading
# it as the output of openstack, which the first real stack.sh showed.)
function phase {
    local output
    output=$( (
        set -o errexit
        set -o xtrace
        source "$PLUGIN_DIR/plugin.sh" "$@"
    ) 2>&1 < /dev/null)
    PHASE_RC=$?
    PHASE_OUT=$(grep -v '^+' <<< "$output" || true)
}

function unit_command {
    iniget "$SYSTEMD_DIR/devstack@$1.service" Service ExecStart
}

function failed_with {
    [[ $PHASE_RC != 0 ]] && contains "$PHASE_OUT" "$1"
}


# stack install
# -------------

echo "# devstack: $DEVSTACK_DIR ($(git -C "$DEVSTACK_DIR" log -1 --format=%h 2>/dev/null || echo 'not a git checkout'))"
echo "# scratch folder: $WORK"

if [[ -z ${HARNESS_VENV:-} ]]; then
    phase stack install
    expect "install: setup_develop and pip_install succeed" \
        test "$PHASE_RC" = 0
    expect "install: the launchers are in devstack's environment" \
        test -x "$DEVSTACK_VENV/bin/ironic-affinity-conductor"
    expect "install: the backend's client library etcd3gw is installed" \
        "$PYTHON" -c 'import etcd3gw'
fi

IRONIC_AFFINITY_BACKEND_URL=memcached://127.0.0.1 OFFLINE=True phase stack install
expect "install: an unknown backend scheme warns, with the whole text" \
    grep -qE "^\[WARNING\] .*plugin.sh:[0-9]+ ironic-affinity: no tooz client library known for the scheme of IRONIC_AFFINITY_BACKEND_URL; install it by hand$" <<< "$PHASE_OUT"


# The real commands: the argument forms the plugin uses
# ------------------------------------------------------

real_conf=$WORK/real.conf
printf '[affinity]\nbackend_url = file://%s/group\n' "$WORK" > "$real_conf"
out=$(timeout 120 "$DEVSTACK_VENV/bin/ironic-affinity" --config-file "$real_conf" check 2>&1)
expect "real 'ironic-affinity --config-file F check' parses its arguments" \
    eval '! contains "$out" "usage:"'
out=$(timeout 120 "$DEVSTACK_VENV/bin/ironic-affinity" --config-file "$real_conf" \
    members --format json --timeout 1 2>&1)
expect "real 'ironic-affinity --config-file F members --format json --timeout 5' parses its arguments" \
    eval '! contains "$out" "usage:"'
out=$(timeout 120 "$DEVSTACK_VENV/bin/ironic-affinity-status" --config-file "$real_conf" \
    upgrade check 2>&1)
expect "real 'ironic-affinity-status --config-file F upgrade check' runs its checks" \
    contains "$out" "Affinity membership"


# stack post-config
# -----------------

# Ironic is installed by then: the phase reads its options.
export PYTHONPATH=$WORK/ironic-with-middleware
reset_deployment
phase stack post-config
expect "post-config: succeeds" test "$PHASE_RC" = 0
expect "post-config: [affinity]hash_ring_manager = affinity" \
    test "$(iniget "$IRONIC_CONF_FILE" affinity hash_ring_manager)" = affinity
expect "post-config: [affinity]backend_url is devstack's etcd" \
    test "$(iniget "$IRONIC_CONF_FILE" affinity backend_url)" = "etcd3+http://127.0.0.1:2379"
IRONIC_AFFINITY_SOFT_AFFINITY_TAGS="rack1:5, net1" phase stack post-config
expect "post-config: tag lists are written as given" \
    test "$(iniget "$IRONIC_CONF_FILE" affinity soft_affinity_tags)" = "rack1:5, net1"
expect "post-config: max_nodes is left at its default" \
    test -z "$(iniget "$IRONIC_CONF_FILE" affinity max_nodes)"
IRONIC_AFFINITY_MAX_NODES=600 phase stack post-config
expect "post-config: max_nodes is written as given" \
    test "$(iniget "$IRONIC_CONF_FILE" affinity max_nodes)" = 600
expect "post-config: rebalance_period is left at its default" \
    test -z "$(iniget "$IRONIC_CONF_FILE" affinity rebalance_period)"
IRONIC_AFFINITY_REBALANCE_PERIOD=300 phase stack post-config
expect "post-config: rebalance_period is written as given" \
    test "$(iniget "$IRONIC_CONF_FILE" affinity rebalance_period)" = 300
ENABLED_SERVICES=key,ir-api,ir-cond phase stack post-config
expect "post-config: etcd3 disabled warns with the whole text" \
    contains "$PHASE_OUT" "the etcd3 service is disabled; enable it unless the URL names an etcd of its own"
expect "post-config: an Ironic without [DEFAULT]hash_ring_manager keeps the launchers" \
    test -z "$(iniget "$IRONIC_CONF_FILE" DEFAULT hash_ring_manager)"
IRONIC_AFFINITY_ENABLE_VIA=ironic-conf phase stack post-config
expect "post-config: ironic-conf on an Ironic without the option dies" \
    failed_with "has no [DEFAULT]hash_ring_manager with the conductor hooks"
reset_deployment
PYTHONPATH=$WORK/ironic-loader-only phase stack post-config
expect "post-config: an Ironic with the loader alone (change A) keeps the launchers" \
    test -z "$(iniget "$IRONIC_CONF_FILE" DEFAULT hash_ring_manager)"
reset_deployment
PYTHONPATH=$WORK/ironic-with-hook phase stack post-config
expect "post-config (Ironic with contrib/ironic): [DEFAULT]hash_ring_manager = affinity" \
    test "$(iniget "$IRONIC_CONF_FILE" DEFAULT hash_ring_manager)" = affinity
expect "post-config (Ironic with contrib/ironic): affinity in [api]middleware" \
    test "$(iniget "$IRONIC_CONF_FILE" api middleware)" = affinity
reset_deployment
IRONIC_AFFINITY_EXTRA_CONDUCTORS=2 IRONIC_RPC_TRANSPORT=json-rpc \
    phase stack post-config
expect "post-config: each extra conductor's file sets its json-rpc port" \
    test "$(iniget "$IRONIC_CONF_DIR/ironic-affinity-cond1.conf" json_rpc port)-$(iniget "$IRONIC_CONF_DIR/ironic-affinity-cond2.conf" json_rpc port)" = 8090-8091
unset PYTHONPATH


# stack extra
# -----------

cond_before="$IRONIC_BIN_DIR/ironic-conductor --config-file=$IRONIC_CONF_FILE"

# Ironic 35 and later: [api]middleware
reset_deployment
iniset "$IRONIC_CONF_FILE" api middleware "audit, request_log"
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra (Ironic >= 35): succeeds" test "$PHASE_RC" = 0
expect "extra (Ironic >= 35): ir-cond runs the launcher with Ironic's arguments" \
    test "$(unit_command ir-cond)" = "$IRONIC_BIN_DIR/ironic-affinity-conductor --config-file=$IRONIC_CONF_FILE"
expect "extra (Ironic >= 35): affinity appended to [api]middleware, the list kept" \
    test "$(iniget "$IRONIC_CONF_FILE" api middleware)" = "audit, request_log,affinity"
expect "extra (Ironic >= 35): uwsgi still loads Ironic's module" \
    test "$(iniget "$IRONIC_UWSGI_CONF" uwsgi module)" = ironic.wsgi:application
expect "extra: both services restarted after daemon-reload" \
    grep -qzE "systemctl daemon-reload.*systemctl restart devstack@ir-cond.service.*systemctl restart devstack@ir-api.service" "$CALLS"
expect "extra: conductors read with Ironic's cloud and the latest API" \
    grep -q "^openstack --os-cloud devstack-system-admin --os-baremetal-api-version latest baremetal conductor list" "$CALLS"
expect "extra: membership read from ironic.conf" \
    grep -q "^ironic-affinity --config-file $IRONIC_CONF_FILE members --format json --timeout 5" "$CALLS"
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra run twice: affinity listed once, unit unchanged" \
    test "$(iniget "$IRONIC_CONF_FILE" api middleware)|$(unit_command ir-cond)" = \
    "audit, request_log,affinity|$IRONIC_BIN_DIR/ironic-affinity-conductor --config-file=$IRONIC_CONF_FILE"

phase unstack
expect "unstack: ir-cond back on ironic-conductor" \
    test "$(unit_command ir-cond)" = "$cond_before"
expect "unstack: affinity taken out of [api]middleware, the rest kept" \
    test "$(iniget "$IRONIC_CONF_FILE" api middleware)" = "audit,request_log"

reset_deployment
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra (Ironic >= 35, no middleware before): [api]middleware = affinity" \
    test "$(iniget "$IRONIC_CONF_FILE" api middleware)" = affinity
phase unstack
expect "unstack: a list of affinity alone is removed" \
    eval '! ini_has_option "$IRONIC_CONF_FILE" api middleware'

# Ironic 29 and 32: our WSGI application under devstack's uwsgi
reset_deployment
PYTHONPATH=$WORK/ironic-without-middleware phase stack extra
expect "extra (Ironic 29/32): succeeds" test "$PHASE_RC" = 0
expect "extra (Ironic 29/32): uwsgi loads ironic_affinity.integration.wsgi:application" \
    test "$(iniget "$IRONIC_UWSGI_CONF" uwsgi module)" = ironic_affinity.integration.wsgi:application
expect "extra (Ironic 29/32): [api]middleware not set (no such option there)" \
    eval '! ini_has_option "$IRONIC_CONF_FILE" api middleware'
expect "extra (Ironic 29/32): the ir-api unit still runs uwsgi on the same ini" \
    contains "$(unit_command ir-api)" "--ini $IRONIC_UWSGI_CONF"
phase unstack
expect "unstack (Ironic 29/32): uwsgi back on Ironic's module" \
    test "$(iniget "$IRONIC_UWSGI_CONF" uwsgi module)" = ironic.wsgi:application

# Failures
reset_deployment
IRONIC_OS_CLOUD=devstack-admin PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra: a 403 on the conductor list dies at once, with the error" \
    failed_with "cloud devstack-admin may not list conductors: Forbidden: Forbidden (HTTP 403)"

reset_deployment
echo 503 > "$STATE/api_status"
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra: an API answering 503 is not up: dies, naming the 503" \
    failed_with "the API did not answer within 4 s: GET http://$IRONIC_HOSTPORT: curl: (22) The requested URL returned error: 503"

reset_deployment
echo "other-host True" > "$STATE/conductors"
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra: no live conductor of this host: dies, listing the conductors" \
    failed_with "no live conductor of this host in the API within 4 s: conductors listed: other-host True"

reset_deployment
echo '[]' > "$STATE/members"
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra: a conductor out of the group: dies" \
    failed_with "the conductor did not join its group within 4 s: harness-host is not among the members: []"

reset_deployment "/usr/bin/something-else --config-file=$IRONIC_CONF_FILE"
iniset "$IRONIC_CONF_FILE" api middleware audit
PYTHONPATH=$WORK/ironic-with-middleware phase stack extra
expect "extra: an ir-cond unit running something else dies before any change" \
    eval 'failed_with "runs neither ironic-conductor nor ironic-affinity-conductor" &&
        test "$(iniget "$IRONIC_CONF_FILE" api middleware)" = audit'

reset_deployment
PYTHONPATH=$WORK/ironic-broken phase stack extra
expect "extra: an Ironic that does not import dies, with Python's error" \
    eval 'failed_with "cannot read the options of Ironic" && failed_with "ImportError: broken"'

for python in ${IRONIC_PYTHONS:-}; do
    version=$("$python" -c 'import importlib.metadata as m; print(m.version("ironic"))' 2>/dev/null)
    if (PYTHON=$python _ironic_affinity_ironic_has_api_middleware); then
        found=yes
    else
        found=no
    fi
    wanted=no
    if [[ ${version%%.*} -ge 35 ]]; then
        wanted=yes
    fi
    expect "detection on a real Ironic $version ($python): [api]middleware $found" \
        test "$found" = "$wanted"
done


# stack test-config: the verification
# -----------------------------------

function verified {
    reset_deployment
    "$@"
    PYTHONPATH=$WORK/ironic-with-middleware phase stack test-config
}

verified :
expect "verify: passes" test "$PHASE_RC" = 0
expect "verify: every node tagged through the API" \
    test "$(grep -c "node set --extra affinity_tags=devstack " "$CALLS")" = 2
expect "verify: a bad tag tried and refused with 400" \
    grep -q "node set --extra affinity_tags=not/a-tag" "$CALLS"
expect "verify: placement read with the latest API version" \
    grep -q "^openstack --os-cloud devstack-system-admin --os-baremetal-api-version latest baremetal node show .* -f value -c conductor" "$CALLS"
expect "verify: waits past 'None' until each node has a conductor" \
    contains "$PHASE_OUT" "nodes placed: 1be26c0b-03f2-4d2d-ae87-c02d7f33c123=harness-host 7c3a1e2f-5b8d-4d0e-9f6a-2b4c6d8e0a11=harness-host"
expect "verify: runs ironic-affinity check on ironic.conf" \
    grep -qx "ironic-affinity --config-file $IRONIC_CONF_FILE check" "$CALLS"
expect "verify: runs ironic-affinity-status upgrade check on ironic.conf" \
    grep -qx "ironic-affinity-status --config-file $IRONIC_CONF_FILE upgrade check" "$CALLS"

verified iniset "$IRONIC_CONF_FILE" affinity node_tags_key placement
expect "verify: tags go under [affinity]node_tags_key" \
    grep -q "node set --extra placement=devstack " "$CALLS"

IRONIC_AFFINITY_VERIFY_NODE_TAGS="rack1, net1" verified :
expect "verify: IRONIC_AFFINITY_VERIFY_NODE_TAGS with a comma and a space" \
    eval 'test "$PHASE_RC" = 0 && grep -q "node set --extra affinity_tags=rack1, net1 " "$CALLS"'

verified eval 'echo 0 > "$STATE/api_validates"'
expect "verify: an API that accepts a bad tag dies" \
    failed_with "the API accepted the bad tag \"not/a-tag\""

verified eval 'echo 99 > "$STATE/place_after"'
expect "verify: nodes never placed: dies, naming them" \
    failed_with "the nodes were not all placed within 4 s: nodes without a conductor: 1be26c0b-03f2-4d2d-ae87-c02d7f33c123 7c3a1e2f-5b8d-4d0e-9f6a-2b4c6d8e0a11"

verified eval 'echo "1 node(s) with no valid conductor: node-1" > "$STATE/ironic-affinity.out"; echo 1 > "$STATE/ironic-affinity.rc"'
expect "verify: ironic-affinity check exiting 1 dies, with its output" \
    failed_with "\"ironic-affinity check\" exited with 1: 1 node(s) with no valid conductor: node-1"

verified eval 'echo "API with affinity: Failure" > "$STATE/ironic-affinity-status.out"; echo 2 > "$STATE/ironic-affinity-status.rc"'
expect "verify: the upgrade check failing dies, with its output" \
    failed_with "\"ironic-affinity-status upgrade check\" exited with 2: API with affinity: Failure"

verified eval ': > "$STATE/nodes"'
expect "verify: no node enrolled dies, saying how to skip" \
    failed_with "no node is enrolled (IRONIC_VM_COUNT?); set IRONIC_AFFINITY_VERIFY=False to skip it"

IRONIC_AFFINITY_VERIFY=False verified eval ': > "$STATE/nodes"'
expect "verify: IRONIC_AFFINITY_VERIFY=False skips it" \
    eval 'test "$PHASE_RC" = 0 && ! grep -q openstack "$CALLS"'


# clean
# -----

mkdir -p "$IRONIC_STATE_PATH/affinity-membership"
IRONIC_AFFINITY_BACKEND_URL="" phase clean
expect "clean: the file driver's group folder is removed" \
    test ! -e "$IRONIC_STATE_PATH/affinity-membership"
mkdir -p "$IRONIC_STATE_PATH/affinity-membership"
phase clean
expect "clean: kept with an etcd backend" \
    test -d "$IRONIC_STATE_PATH/affinity-membership"

echo "1..$COUNT"
if ((FAILED)); then
    echo "# $FAILED of $COUNT checks failed"
    exit 1
fi
echo "# all $COUNT checks passed"
