#!/bin/bash
#
# Run DevStack with Ironic and the ironic-affinity plugin on this machine
# (Debian 12, no systemd as PID 1, no network beyond the package
# registries), check the result, and put the machine back as it was.
#
#   tools/devstack/stack-here.sh --devstack GIT --requirements GIT \
#       --keystone GIT --ironic GIT [--ironic-hook] [--out DIR] \
#       [--keep] [STEP...]
#
# GIT is a git repository of each project (a local clone or a bare
# snapshot); its default branch is cloned into /opt/stack, so that
# DevStack fetches nothing. STEP is any of prepare, stack, check, undo;
# all four by default, "undo" also when an earlier step fails, unless
# --keep. --ironic-hook applies contrib/ironic/master to the Ironic clone,
# and the checks then run a second time with [DEFAULT]hash_ring_manager =
# affinity and Ironic's own commands. doc/source/contributor/devstack.rst
# says what this does, why, and what a run measured.

set -o errexit -o nounset -o pipefail
# One collation for every sort and comm below.
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT=$(cd "$HERE/../.." && pwd)

DEST=/opt/stack
# Kept apart from DEST: it must outlive the stack user's home until the
# end of "undo".
TOOLS=/var/tmp/ironic-affinity-devstack
STATE=$TOOLS/saved
OUT=/tmp/ironic-affinity-devstack
KEEP=False
IRONIC_HOOK=False
declare -A SOURCES=()
STEPS=()

# The MariaDB database that the DevStack services use, and the Redis
# database of the membership group: one the machine's Redis leaves empty.
DATABASE_PASSWORD=devstack-$RANDOM$RANDOM
REDIS_DB=7
NODES=8

die() {
    echo "stack-here: $*" >&2
    exit 1
}

say() {
    echo "stack-here: $(date -u +%T) $*"
}

while (($#)); do
    case $1 in
        --devstack | --requirements | --keystone | --ironic)
            SOURCES[${1#--}]=$2
            shift 2
            ;;
        --out) OUT=$2; shift 2 ;;
        --keep) KEEP=True; shift ;;
        --ironic-hook) IRONIC_HOOK=True; shift ;;
        prepare | stack | check | undo) STEPS+=("$1"); shift ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done
if ((${#STEPS[@]} == 0)); then
    STEPS=(prepare stack check undo)
fi
[[ $(id -u) == 0 ]] || die "run it as root: it installs packages and creates the stack user"
mkdir -p "$OUT"

# Seconds of each step, written to $OUT/timings as "step seconds".
timed() {
    local name=$1 start=$SECONDS status=0
    shift
    # errexit holds in the subshell: the caller has turned it off rather
    # than test this function with "if", which would void it.
    (set -o errexit; "$@")
    status=$?
    echo "$name $((SECONDS - start))" >> "$OUT/timings"
    say "$name: $((SECONDS - start)) s, exit status $status"
    return $status
}

as_stack() {
    su - stack -c "$*"
}


# prepare
# -------

# Every path of the trees DevStack writes to, sorted as one list.
list_paths() {
    find /etc /usr/local /opt /srv /var/lib /var/log /var/cache/apt \
        -xdev 2>/dev/null | sort
}

save_machine() {
    mkdir -p "$STATE"
    dpkg-query -W -f '${Package}\n' | sort > "$STATE/packages"
    dpkg-query -W -f '${Package} ${Version}\n' | sort > "$STATE/versions"
    # The configuration and the trees DevStack writes to: new paths are
    # removed by "undo", changed files put back.
    tar -C / -cpf "$STATE/etc.tar" etc
    list_paths > "$STATE/paths"
    mariadb -uroot -N -e "SHOW CREATE USER 'root'@'localhost'" | cut -f2- \
        > "$STATE/mariadb-root"
    mariadb -uroot -N -e "SELECT CONCAT(QUOTE(User), '@', QUOTE(Host)) FROM mysql.user" \
        | sort > "$STATE/mariadb-users"
    mariadb -uroot -N -e "SHOW DATABASES" | sort > "$STATE/mariadb-databases"
    rabbitmqctl -q list_users 2>/dev/null | awk 'NR > 1 {print $1}' | sort \
        > "$STATE/rabbitmq-users" || true
    ss -Hltn | awk '{print $4}' | sort -u > "$STATE/listening"
    [[ $(redis-cli -n $REDIS_DB DBSIZE) == 0 ]] ||
        die "Redis database $REDIS_DB is not empty: the membership group needs an empty one"
}

install_systemctl() {
    python3 -m venv "$TOOLS/venv"
    "$TOOLS/venv/bin/pip" install -q docker-systemctl-replacement
    # Debian's own way to put a file in place of a package's: undone by
    # "dpkg-divert --rename --remove" in "undo".
    dpkg-divert --local --rename --divert /bin/systemctl.ironic-affinity \
        --add /bin/systemctl
    install -m 0755 "$HERE/systemctl" /bin/systemctl
}

clone_sources() {
    local name
    for name in devstack requirements keystone ironic; do
        [[ -n ${SOURCES[$name]:-} ]] || die "--$name is missing"
        # Cloned by root, the owner of the snapshots (git refuses another
        # user's repository), with copies of their objects, not links.
        git clone -q --no-hardlinks "${SOURCES[$name]}" "$DEST/$name"
    done
    git clone -q --no-hardlinks "$PROJECT" "$DEST/ironic-affinity"
    chown -R stack: "$DEST"
    if [[ $IRONIC_HOOK == True ]]; then
        # The whole series, in order (Ironic's commands alone enable the
        # plugin only with changes A and B), committed so that pbr sees a
        # clean tree and generates the entry points of the patched
        # pyproject.toml.
        local patch
        for patch in "$DEST"/ironic-affinity/contrib/ironic/master/*.patch; do
            as_stack "cd $DEST/ironic && git apply --unidiff-zero --index $patch"
        done
        as_stack "cd $DEST/ironic && \
            git -c user.name=stack-here -c user.email=stack-here@localhost \
                commit -q -m 'The pluggable hash ring manager (contrib/ironic)'"
    fi
}

write_local_conf() {
    local i
    for ((i = 0; i < NODES; i++)); do
        printf '127.0.0.1 52:54:00:aa:00:%02x admin password\n' "$i"
    done > "$DEST/hardware_info"
    cat > "$DEST/devstack/local.conf" <<EOF
[[local|localrc]]
ADMIN_PASSWORD=$DATABASE_PASSWORD
DATABASE_PASSWORD=$DATABASE_PASSWORD
RABBIT_PASSWORD=$DATABASE_PASSWORD
SERVICE_PASSWORD=$DATABASE_PASSWORD
# The machine's MariaDB listens on 127.0.0.1 only, and is not restarted.
# Its root logs in through its Unix socket or with no password: DevStack
# cannot give root a password there, so the services use a user of
# their own, which "undo" drops.
DATABASE_HOST=127.0.0.1
DATABASE_USER=devstack
MYSQL_GATHER_PERFORMANCE=False
# Every repository is already in $DEST: fetch nothing.
ERROR_ON_CLONE=True
LOGFILE=$DEST/logs/stack.sh.log
LOG_COLOR=False

disable_all_services
enable_service key mysql
enable_plugin ironic https://opendev.org/openstack/ironic
enable_plugin ironic-affinity https://opendev.org/x/ironic-affinity

# Ironic on fake hardware: no VMs, bridges, ramdisk, tftp or Neutron.
IRONIC_IS_HARDWARE=True
IRONIC_BAREMETAL_BASIC_OPS=False
IRONIC_HWINFO_FILE=$DEST/hardware_info
IRONIC_DEPLOY_DRIVER=fake-hardware
IRONIC_ENABLED_HARDWARE_TYPES=fake-hardware
IRONIC_ENABLED_BOOT_INTERFACES=fake
IRONIC_ENABLED_DEPLOY_INTERFACES=fake
IRONIC_ENABLED_INSPECT_INTERFACES=fake,no-inspect
IRONIC_ENABLED_NETWORK_INTERFACES=noop
IRONIC_NETWORK_INTERFACE=noop
IRONIC_ENABLED_STORAGE_INTERFACES=noop
IRONIC_ENABLED_RAID_INTERFACES=fake,no-raid
IRONIC_ENABLED_RESCUE_INTERFACES=fake,no-rescue
IRONIC_ENABLED_VENDOR_INTERFACES=fake,no-vendor
IRONIC_ENABLED_BIOS_INTERFACES=fake,no-bios
IRONIC_DHCP_PROVIDER=none
IRONIC_AUTOMATED_CLEAN_ENABLED=False
# RabbitMQ stays the machine's: Ironic's RPC goes over json-rpc.
IRONIC_RPC_TRANSPORT=json-rpc
Q_AGENT=openvswitch

# The plugin: the membership group in the machine's Redis, and two
# conductors on this host, each preferring one rack.
IRONIC_AFFINITY_BACKEND_URL=redis://127.0.0.1:6379?db=$REDIS_DB
IRONIC_AFFINITY_SOFT_AFFINITY_TAGS=rack1:10
IRONIC_AFFINITY_EXTRA_CONDUCTORS=1
IRONIC_AFFINITY_VERIFY=True

[[post-config|\$IRONIC_CONF_DIR/ironic-affinity-cond1.conf]]
[affinity]
soft_affinity_tags = rack2:10
hard_anti_affinity_tags = quarantine
EOF
    chown stack: "$DEST/hardware_info" "$DEST/devstack/local.conf"
}

# Ironic's lib/ironic installs the packages "shim" and "shim-signed" when
# sourced; Debian 12 has only the second (Ubuntu has both), and apt then
# stops stack.sh. An empty package of that name, purged by "undo", lets
# it go on; nothing of Ironic needs shim on fake hardware. The epoch puts
# it past the versions that shim-unsigned conflicts with.
install_shim_stand_in() {
    local build=$TOOLS/shim-stand-in
    mkdir -p "$build/DEBIAN"
    cat > "$build/DEBIAN/control" <<EOF
Package: shim
Version: 1:0~ironic-affinity
Architecture: all
Maintainer: ironic-affinity <stack-here@localhost>
Description: empty stand-in for Ubuntu's shim, for Ironic's devstack plugin
EOF
    dpkg-deb --build "$build" "$TOOLS/shim.deb" > /dev/null
    dpkg -i "$TOOLS/shim.deb" > /dev/null
}

prepare() {
    [[ ! -e $DEST ]] && ! getent passwd stack > /dev/null ||
        die "$DEST or the stack user exists: not a clean start (run \"$0 undo\" first)"
    [[ ! -e $TOOLS ]] || die "$TOOLS exists: an earlier run was not undone"
    mkdir -p "$TOOLS"
    save_machine
    apt-get update -q
    comm -13 "$STATE/packages" <(printf '%s\n' sudo git | sort) |
        xargs -r apt-get install -y -q
    install_systemctl
    useradd --shell /bin/bash --home-dir "$DEST" --create-home stack
    chmod 755 "$DEST"
    echo 'stack ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/ironic-affinity-stack
    chmod 0440 /etc/sudoers.d/ironic-affinity-stack
    clone_sources
    install_shim_stand_in
    # Ironic's plugin builds dnsmasq from a git server otherwise.
    touch "$DEST/.patched-dnsmasq"
    write_local_conf
}


# stack
# -----

stack() {
    # stack.sh again on a DevStack that ran: its services stop first.
    if [[ -e $DEST/logs/stack.sh.log ]]; then
        as_stack "cd $DEST/devstack && ./unstack.sh" > "$OUT/unstack.out" 2>&1
    fi
    as_stack "cd $DEST/devstack && ./stack.sh" > "$OUT/stack.out" 2>&1
}


# check
# -----

check() {
    local mode=launcher status=0
    if [[ $IRONIC_HOOK == True ]]; then
        mode=ironic-conf
    fi
    as_stack "$DEST/data/venv/bin/python $DEST/ironic-affinity/tools/devstack/checks.py $mode" \
        2>&1 | tee "$OUT/checks-$mode.out" || status=$?
    return $status
}


# undo
# ----

collect_logs() {
    mkdir -p "$OUT/logs"
    cp -a "$DEST/logs/." "$OUT/logs/" 2>/dev/null || true
    cp -a /var/log/journal/. "$OUT/logs/journal/" 2>/dev/null || true
    cp -a /etc/ironic "$OUT/logs/etc-ironic" 2>/dev/null || true
    cp "$DEST/devstack/local.conf" "$OUT/" 2>/dev/null || true
}

stop_everything() {
    if [[ -x $DEST/devstack/unstack.sh ]]; then
        as_stack "cd $DEST/devstack && ./unstack.sh" > "$OUT/unstack.out" 2>&1 ||
            say "unstack.sh failed (see $OUT/unstack.out); stopping what is left"
    fi
    # What unstack.sh leaves running: the web server, memcached, libvirt;
    # only where DevStack installed them (a server of the machine's own
    # stays).
    local package unit
    for package in apache2 memcached libvirt-daemon; do
        if grep -qx "$package" "$STATE/packages"; then
            continue
        fi
        case $package in
            libvirt-daemon) unit="libvirtd virtlogd virtlockd" ;;
            *) unit=$package ;;
        esac
        for unit in $unit; do
            if [[ -x $TOOLS/venv/bin/systemctl3 ]]; then
                "$TOOLS/venv/bin/systemctl3" stop "$unit" > /dev/null 2>&1 || true
            fi
            pkill -x "$unit" || true
        done
    done
    pkill -u stack || true
    sleep 2
    pkill -9 -u stack || true
}

restore_mariadb() {
    [[ -s $STATE/mariadb-root ]] || return 0
    local -a login=(mariadb -uroot)
    if ! mariadb -uroot -e 'SELECT 1' > /dev/null 2>&1; then
        local password
        password=$(sed -n 's/^DATABASE_PASSWORD=//p' "$DEST/devstack/local.conf" 2>/dev/null ||
            sed -n 's/^DATABASE_PASSWORD=//p' "$OUT/local.conf")
        login=(mariadb -uroot "-p$password")
    fi
    local database user
    comm -13 "$STATE/mariadb-databases" <("${login[@]}" -N -e 'SHOW DATABASES' | sort) |
        while read -r database; do
            "${login[@]}" -e "DROP DATABASE \`$database\`"
        done
    comm -13 "$STATE/mariadb-users" <("${login[@]}" -N -e \
        "SELECT CONCAT(QUOTE(User), '@', QUOTE(Host)) FROM mysql.user" | sort) |
        while read -r user; do
            "${login[@]}" -e "DROP USER $user"
        done
    "${login[@]}" -e "$(sed 's/^CREATE USER/ALTER USER/' "$STATE/mariadb-root")"
}

restore_rabbitmq() {
    [[ -s $STATE/rabbitmq-users ]] || return 0
    if grep -qx guest "$STATE/rabbitmq-users" &&
            ! rabbitmqctl -q list_users | awk '{print $1}' | grep -qx guest; then
        rabbitmqctl add_user guest guest
        rabbitmqctl set_user_tags guest administrator
        rabbitmqctl set_permissions -p / guest '.*' '.*' '.*'
    fi
}

restore_files() {
    # systemd's systemctl first, for the maintainer scripts of the
    # packages purged below.
    if dpkg-divert --list /bin/systemctl | grep -q ironic-affinity; then
        rm -f /bin/systemctl
        dpkg-divert --local --rename --remove /bin/systemctl
    fi
    # Packages next: purging them takes their files along. sudo was
    # installed by "prepare" (root needs no sudo here); DevStack's
    # grub-efi-amd64-signed is marked essential. Only packages that were
    # not there before go.
    local added removed
    added=$(comm -13 "$STATE/packages" <(dpkg-query -W -f '${Package}\n' | sort) | xargs)
    if [[ -n $added ]]; then
        DEBIAN_FRONTEND=noninteractive SUDO_FORCE_REMOVE=yes apt-get purge -y -q \
            --allow-remove-essential $added > "$OUT/purge.out" 2>&1
    fi
    removed=$(comm -23 "$STATE/packages" <(dpkg-query -W -f '${Package}\n' | sort) | xargs)
    if [[ -n $removed ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q $removed > "$OUT/reinstall.out" 2>&1
    fi
    # New paths, deepest first. Only files and empty directories go: a
    # directory that still holds something is left, and shown.
    list_paths | comm -13 --check-order "$STATE/paths" - | sort -r > "$OUT/new-paths"
    local path
    while read -r path; do
        if [[ -d $path && ! -L $path ]]; then
            rmdir "$path" 2> /dev/null || echo "left: $path"
        else
            rm -f "$path"
        fi
    done < "$OUT/new-paths"
    # Changed files of /etc, written back in place (some are mount points).
    # tar -d exits with 1 when anything differs.
    local changed
    { tar -C / -df "$STATE/etc.tar" 2>/dev/null || true; } | sed -n 's/: \(Contents\|Mode\|Uid\|Gid\|Size\|Mod time\) differ$//p' |
        sort -u | while read -r changed; do
            tar -C / -xpf "$STATE/etc.tar" --to-stdout "$changed" > "/$changed" 2>/dev/null || true
        done
    { tar -C / -df "$STATE/etc.tar" 2>&1 || true; } | sed -n 's/^tar: \(.*\): Warning: Cannot stat: No such file or directory$/\1/p' |
        while read -r changed; do
            tar -C / -xpf "$STATE/etc.tar" "$changed"
        done
}

undo() {
    [[ -s $STATE/packages ]] ||
        die "nothing to undo: no state saved in $STATE (\"prepare\" saves it)"
    collect_logs
    stop_everything
    restore_mariadb
    restore_rabbitmq
    redis-cli -n $REDIS_DB FLUSHDB > /dev/null
    if getent passwd stack > /dev/null; then
        userdel --remove stack 2> /dev/null || userdel stack
    fi
    rm -rf "$DEST"
    rm -f /etc/sudoers.d/ironic-affinity-stack
    restore_files
    rm -rf "$TOOLS"
    show_machine
}

# What "undo" promises, shown: each line says yes or no.
show_machine() {
    {
        echo "MariaDB root login with no password: $(mariadb -uroot -h127.0.0.1 -N -e 'SELECT "yes"' 2>&1)"
        echo "RabbitMQ user guest: $(rabbitmqctl -q list_users | awk '$1 == "guest" {print "yes"}')"
        echo "Listening on port 80: $(ss -Hltn 'sport = :80' | wc -l) socket(s)"
        echo "systemctl diverted: $(dpkg-divert --list /bin/systemctl | wc -l) diversion(s)"
        echo "systemctl is systemd's: $(cd / && grep '  bin/systemctl$' /var/lib/dpkg/info/systemd.md5sums | md5sum -c --quiet - > /dev/null 2>&1 && echo yes || echo no)"
        echo "stack user: $(getent passwd stack > /dev/null && echo present || echo absent)"
        echo "packages not there before: $(comm -13 "$OUT/packages.before" <(dpkg-query -W -f '${Package}\n' | sort) | wc -l)"
        # Shown, not undone: an older version may be gone from the archive.
        echo "packages of another version than before: $(comm -13 "$OUT/versions.before" <(dpkg-query -W -f '${Package} ${Version}\n' | sort) | xargs)"
        echo "ports listening now and not before: $(comm -13 "$OUT/listening.before" <(ss -Hltn | awk '{print $4}' | sort -u) | xargs)"
    } | tee "$OUT/machine-after"
}


# What show_machine compares with, kept once "undo" has removed the
# saved state.
keep_before() {
    local name
    for name in packages versions listening; do
        cp "$STATE/$name" "$OUT/$name.before" 2>/dev/null || true
    done
}

for step in "${STEPS[@]}"; do
    if [[ $step == prepare ]]; then
        : > "$OUT/timings"
    fi
    if [[ $step == undo ]]; then
        keep_before
    fi
    set +o errexit
    timed "$step" "$step"
    status=$?
    set -o errexit
    if ((status != 0)); then
        if [[ $KEEP == False && $step != undo && " ${STEPS[*]} " == *" undo "* ]]; then
            say "$step failed: undoing"
            keep_before
            timed undo undo || true
        fi
        die "$step failed; output in $OUT"
    fi
done
