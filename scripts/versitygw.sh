#!/usr/bin/env bash
# A local versitygw (S3 gateway, posix backend) for the s3 package's tests.
#
#   scripts/versitygw.sh install   install versitygw v1.8.0 if missing (go install, ~2 min cold;
#                                  its output is shown only if it fails)
#   eval "$(scripts/versitygw.sh start)"
#                                  install if needed, start it on 127.0.0.1 with a
#                                  temporary directory, create the bucket, and print
#                                  the variables the tests read:
#                                    DLQDUMP_S3_ENDPOINT DLQDUMP_S3_ACCESS_KEY
#                                    DLQDUMP_S3_SECRET_KEY DLQDUMP_S3_BUCKET
#   eval "$(scripts/versitygw.sh aws)"
#                                  print the standard AWS variables for the running
#                                  server, which the dlqdump command, the demo (-s3)
#                                  and the AWS SDK read: AWS_ENDPOINT_URL
#                                  AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
#                                  (they replace your own AWS settings in that shell)
#   scripts/versitygw.sh stop      stop it and remove its directory
#   scripts/versitygw.sh status    say whether it runs
#
# For trying the command on a local S3:
#   eval "$(scripts/versitygw.sh start)"; eval "$(scripts/versitygw.sh aws)"
#   go run ./demo -s3 "s3://$DLQDUMP_S3_BUCKET/orders/"     # or a Queue with an s3.Writer
#   dlqdump ls "s3://$DLQDUMP_S3_BUCKET/orders/"
#
# The state (pid, directory, port) is kept in $DLQDUMP_VGW_STATE (default
# ${TMPDIR:-/tmp}/dlqdump-versitygw.state). The credentials are random and
# only good for this throwaway local server.
#
# Without these variables, the tests (./s3/, ./cmd/dlqdump/), bench/ and
# cmd/dlqdump-reliability start versitygw themselves through s3/s3test when
# the binary is on PATH or in GOBIN/GOPATH/bin, and install it first under CI.
set -euo pipefail

VERSION=v1.8.0
STATE=${DLQDUMP_VGW_STATE:-${TMPDIR:-/tmp}/dlqdump-versitygw.state}
BUCKET=${DLQDUMP_S3_BUCKET:-dlqdump-test}

log() { echo "versitygw.sh: $*" >&2; }

find_bin() {
	if command -v versitygw >/dev/null 2>&1; then
		command -v versitygw
		return 0
	fi
	local gobin gopath p
	gobin=$(go env GOBIN 2>/dev/null || true)
	gopath=$(go env GOPATH 2>/dev/null || true)
	for p in "$gobin" ${gopath//:/ }; do
		[ -n "$p" ] || continue
		[ "$p" = "$gobin" ] || p="$p/bin"
		if [ -x "$p/versitygw" ]; then
			echo "$p/versitygw"
			return 0
		fi
	done
	return 1
}

install() {
	if bin=$(find_bin); then
		log "found $bin"
		return 0
	fi
	log "installing github.com/versity/versitygw/cmd/versitygw@$VERSION (about 2 minutes)"
	# go install's output is shown only if it fails.
	local out
	out=$(mktemp "${TMPDIR:-/tmp}/versitygw-install.XXXXXX")
	if ! go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >"$out" 2>&1; then
		log "go install failed; its output:"
		cat "$out" >&2
		rm -f "$out"
		exit 1
	fi
	rm -f "$out"
	bin=$(find_bin) || { log "installed, but versitygw is not in PATH, GOBIN or GOPATH/bin"; exit 1; }
	log "installed $bin"
}

free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	log "no free port found"
	return 1
}

running() {
	[ -f "$STATE" ] || return 1
	# shellcheck disable=SC1090
	. "$STATE"
	kill -0 "$VGW_PID" 2>/dev/null
}

print_env() {
	echo "export DLQDUMP_S3_ENDPOINT=http://127.0.0.1:$VGW_PORT"
	echo "export DLQDUMP_S3_ACCESS_KEY=$VGW_ACCESS"
	echo "export DLQDUMP_S3_SECRET_KEY=$VGW_SECRET"
	echo "export DLQDUMP_S3_BUCKET=$VGW_BUCKET"
}

print_aws() {
	echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$VGW_PORT"
	echo "export AWS_ACCESS_KEY_ID=$VGW_ACCESS"
	echo "export AWS_SECRET_ACCESS_KEY=$VGW_SECRET"
	echo "export AWS_REGION=us-east-1"
	echo "export DLQDUMP_S3_BUCKET=$VGW_BUCKET"
}

start() {
	if running; then
		log "already running (pid $VGW_PID, port $VGW_PORT)"
		print_env
		return 0
	fi
	install
	local dir port access secret pid empty
	dir=$(mktemp -d "${TMPDIR:-/tmp}/dlqdump-versitygw.XXXXXX")
	mkdir -p "$dir/root"
	port=$(free_port)
	access=dlqdump-$RANDOM$RANDOM
	secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
		nohup "$bin" --port "127.0.0.1:$port" --quiet --keep-alive posix "$dir/root" >"$dir/versitygw.log" 2>&1 </dev/null &
	pid=$!
	cat >"$STATE" <<-EOF
		VGW_PID=$pid
		VGW_DIR=$dir
		VGW_PORT=$port
		VGW_ACCESS=$access
		VGW_SECRET=$secret
		VGW_BUCKET=$BUCKET
	EOF
	# Create the bucket (SigV4 by curl), waiting for the server to listen.
	empty=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
	local code="" i
	for i in $(seq 1 100); do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "versitygw exited:"
			cat "$dir/versitygw.log" >&2
			rm -rf "$dir" "$STATE"
			exit 1
		fi
		code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
			--aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
			-H "x-amz-content-sha256: $empty" "http://127.0.0.1:$port/$BUCKET" || true)
		case $code in
		200 | 409) break ;;
		esac
		sleep 0.1
	done
	case $code in
	200 | 409) ;;
	*)
		log "could not create bucket $BUCKET (HTTP $code); log in $dir/versitygw.log"
		stop
		exit 1
		;;
	esac
	log "versitygw $VERSION on 127.0.0.1:$port (pid $pid), bucket $BUCKET, data in $dir/root"
	. "$STATE"
	print_env
}

stop() {
	if ! [ -f "$STATE" ]; then
		log "not running"
		return 0
	fi
	# shellcheck disable=SC1090
	. "$STATE"
	if kill -0 "$VGW_PID" 2>/dev/null; then
		kill "$VGW_PID" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$VGW_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$VGW_PID" 2>/dev/null || true
	fi
	rm -rf "$VGW_DIR" "$STATE"
	log "stopped"
}

case ${1:-} in
install) install ;;
start) start ;;
stop) stop ;;
aws)
	if running; then
		print_aws
	else
		log "not running: start it first (eval \"\$($0 start)\")"
		exit 1
	fi
	;;
status)
	if running; then
		log "running (pid $VGW_PID, port $VGW_PORT)"
		print_env
	else
		log "not running"
		exit 1
	fi
	;;
*)
	echo "usage: $0 install|start|aws|stop|status" >&2
	exit 2
	;;
esac
