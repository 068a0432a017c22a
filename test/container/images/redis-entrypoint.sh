#!/bin/sh
# The official redis image is built with protected mode off, so other containers can connect
# without a password; Debian's build keeps it on. Turn it off the same way for `redis-server ...`.
if [ "$1" = redis-server ]; then
  shift
  set -- redis-server --protected-mode no "$@"
fi
exec "$@"
