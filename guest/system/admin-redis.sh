#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The administrator's path on Debian 12 with the kml kernel package
# installed and booted: Debian's redis-server, started by Debian's unit,
# runs from the trusted directory in kernel mode.  Run as root.
# README and docs/kernel-mode.md quote this file; the Debian-system test
# (tests/guest/test_debian_system.py) runs it as it is.
set -eu

# 1. The kernel is kml's (apt install ./linux-image-*-kml-*.deb; reboot)
uname -r
journalctl -k -b | grep 'kml:'

# 2. The trusted directory and the group: root's, writable by root only
install -d -o root -g root -m 755 /trusted
getent group kml >/dev/null || groupadd --system kml
usermod -a -G kml redis
cat >/etc/sysctl.d/60-kml.conf <<EOF
kernel.kml_trusted_dir = /trusted
kernel.kml_group = $(getent group kml | cut -d: -f3)
EOF
sysctl -p /etc/sysctl.d/60-kml.conf

# 3. The program, as root's file that nobody else may write
install -o root -g root -m 755 /usr/bin/redis-server /trusted/redis-server

# 4. A drop-in: Debian's unit runs the trusted copy, with its own
#    arguments, and without the settings that keep a service in user mode
#    (no_new_privs, seccomp filters, a private user namespace); its
#    private mounts (ProtectSystem=, PrivateTmp=, ...) stay
mkdir -p /etc/systemd/system/redis-server.service.d
cat >/etc/systemd/system/redis-server.service.d/kml.conf <<'EOF'
[Service]
ExecStart=
ExecStart=/trusted/redis-server /etc/redis/redis.conf --supervised systemd --daemonize no
ExecPaths=/trusted/redis-server
NoNewPrivileges=no
PrivateUsers=no
PrivateDevices=no
SystemCallFilter=
SystemCallArchitectures=
RestrictAddressFamilies=
RestrictNamespaces=no
RestrictRealtime=no
RestrictSUIDSGID=no
MemoryDenyWriteExecute=no
LockPersonality=no
ProtectClock=no
ProtectHostname=no
ProtectKernelLogs=no
ProtectKernelModules=no
ProtectKernelTunables=no
EOF
systemctl daemon-reload
systemctl restart redis-server

# 5. The check: KernelMode: 1, and the service answers
grep KernelMode: /proc/"$(systemctl show -p MainPID --value redis-server)"/status
redis-benchmark -q -n 2000 -t set,get
