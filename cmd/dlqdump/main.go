// Command dlqdump inspects, verifies, copies and restores dlqdump dumps: the
// segments that github.com/dlqdump/dlqdump writes to a directory or an S3
// prefix.
//
// Install it from a clone of the repository with
//
//	go install ./cmd/dlqdump
//
// or, where the module is published, with
//
//	go install github.com/dlqdump/dlqdump/cmd/dlqdump@latest
//
// Usage:
//
//	dlqdump COMMAND LOCATION [flags]
//
// A LOCATION is a dump directory (the Directory of an fs.Writer) or
// s3://BUCKET/PREFIX (the Bucket and Prefix of an s3.Writer). S3 settings
// come from the standard AWS environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL,
// AWS_PROFILE and the shared config files), overridden by the flags
// --s3-endpoint, --s3-region and --s3-path-style. Path-style addressing is on
// by default when an endpoint is set (S3-compatible servers need it), off
// for AWS itself. Without a region, us-east-1 is used.
//
// Commands:
//
//	ls LOCATION                    segments: state, data version, records, sizes, time range
//	stat LOCATION                  totals and records by header value (--by KEY)
//	cat LOCATION [SEGMENT...]      records as JSON lines (or --format hex|raw)
//	verify LOCATION [SEGMENT...]   check every checksum; --salvage DIR keeps the intact records
//	restore LOCATION [SEGMENT...]  redrive records to stdout or an HTTP endpoint (--to)
//	replay LOCATION ID...          deliver these records now (--to)
//	discard LOCATION ID... --reason WHY
//	                               set records aside into the quarantine, with who and why
//	log LOCATION                   the store's change log (--verify: check its hash chain)
//	cp SRC DST [SEGMENT...]        copy segments between locations
//	mv SRC DST [SEGMENT...]        move segments between locations
//	quarantine ls LOCATION         quarantined segments and why
//	quarantine release LOCATION [SEGMENT...|--all]
//	prune LOCATION --area AREA     remove expired segments of an area (--max-age 30d, ...)
//	rewrap LOCATION --recipient R  wrap the data keys of encrypted segments for new recipients
//	keygen [-o FILE] [--pq]        an age key pair for encrypted dumps
//
// Every command has --help. --quiet suppresses progress bars and
// informational output; progress bars are drawn only when stderr is a
// terminal.
//
// # Output
//
// cat writes one JSON object per record and line:
//
//	{"segment":"20260301T120000.000000000Z-00000000000000a1.dlq","area":"ready","seq":0,
//	 "time":"2026-03-01T12:00:00.5Z","headers":{"reason":"failed"},"payload":"{\"id\":1}"}
//
// The payload is a JSON string when it is valid, printable UTF-8 (tabs and
// line breaks allowed), else base64 with "payload_base64":true. With
// --proto-descriptor and --proto-message it is the protojson form of the
// message, an object, and a payload that does not parse keeps its text or
// base64 form with "payload_error" saying why.
//
// ls --json, quarantine ls --json and cat write JSON lines (one object per
// segment or record), so the output can be streamed into jq; stat --json
// writes one object.
//
// restore without --to writes one JSON object per delivered record:
// {"headers":{...},"payload":...} as for cat, the headers as delivered (the
// "replays" header raised by one). With --to URL it POSTs each record's
// payload with its headers as X-Dlq-KEY request headers (values that are
// not printable ASCII RFC 2047 encoded), --concurrency at once. A record the
// endpoint refuses (a 3xx or a 4xx other than 408, 425 and 429) is
// quarantined by the Restorer, never deleted. An endpoint that is
// unavailable (connection errors, timeouts, 408, 425, 429, 5xx; retried with
// exponential backoff and full jitter, Retry-After honoured up to a minute,
// up to --max-attempts) stops the restore with exit status 5 and leaves the
// records not delivered ready. restore accepts segments of any data version
// unless --version is given.
//
// # Exit status
//
//	0    success
//	1    error (the message names the segment and offset when there is one)
//	2    usage: bad command, argument or flag
//	3    damage found: verify found a damaged segment (ls, stat and cat too,
//	     after printing everything intact)
//	4    restore: some records were not delivered (quarantined or in
//	     damaged blocks); they are kept in the quarantine area
//	5    restore --to: the endpoint was unavailable (connection refused,
//	     timeouts, 5xx, 429): the restore stopped, the records not delivered
//	     stay ready
//	130  interrupted (SIGINT or SIGTERM)
//
// When several apply, 1 wins over 3, 4 and 5.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
