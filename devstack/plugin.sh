#!/bin/bash
#
# plugin.sh - devstack entry point of ironic-affinity
#
# Only maps devstack's modes and phases to the functions of
# lib/ironic-affinity. Enable this plugin after Ironic's: its phases must
# run once Ironic's have (settings declares plugin_requires for the
# tools that write local.conf).

source "$(dirname "${BASH_SOURCE[0]}")/lib/ironic-affinity"

if is_service_enabled ir-api ir-cond; then
    case $1 in
        stack)
            case $2 in
                install)
                    echo_summary "Installing ironic-affinity"
                    install_ironic_affinity
                    ;;
                post-config)
                    echo_summary "Configuring ironic-affinity"
                    configure_ironic_affinity
                    ;;
                extra)
                    echo_summary "Running Ironic with ironic-affinity"
                    start_ironic_affinity
                    ;;
                test-config)
                    # The last phase of stack.sh: every plugin has
                    # started its services and Ironic's has enrolled its
                    # nodes; tempest has not run yet.
                    echo_summary "Verifying ironic-affinity placement"
                    verify_ironic_affinity
                    ;;
            esac
            ;;
        unstack)
            stop_ironic_affinity
            ;;
        clean)
            cleanup_ironic_affinity
            ;;
    esac
fi
