// Package transform changes dead letters on their way back to a
// destination: a jq program (github.com/itchyny/gojq) as a
// dlqdump.Transform, and a unified diff of a record before and after,
// which a dry run (dlqdump restore --jq ... --dry-run) and the web
// console's preview show.
//
// A program sees each record as one JSON object and gives it back, changed:
//
//	{"id": "019a3f2c7d1e5b8a90c4d2e1-42", "time": "2026-03-01T12:00:00Z",
//	 "headers": {"reason": "failed", "error": "..."},
//	 "payload": {"order": {"id": "ord-7", "email": "A@EXAMPLE.COM"}}}
//
// The payload is its JSON value when it is JSON, a string when it is other
// UTF-8 text, and its base64 with "payload_base64": true otherwise, as
// dlqdump cat prints it. What the program returns is delivered: its
// "payload" (JSON again as gojq prints it, compact, keys sorted; a string
// stays text when the payload was text, and is decoded when
// "payload_base64" is true) and its "headers" (strings; null removes one;
// left out: unchanged). "id" and "time" are the record's and cannot be
// changed. A simple fix:
//
//	.payload.order.email |= ascii_downcase
//
// A record the program fails on (an error, error("why"), no result, more
// than one, something else than an object with a payload) is quarantined
// with that error, its stored original kept; nothing is lost. The program
// cannot read the environment nor any file, and one record may take at
// most Options.Timeout.
//
// The fast path. Most repairs are a pipe of simple edits, and those
// programs are applied to the payload's bytes in one pass, without gojq,
// some ten times cheaper: assignments of constants (.payload.a.b = "x",
// = null, = {"k": [1]}) and of paths (.payload.a = .payload.b, = .id,
// = .time, = .headers.h), //=, updates with ascii_downcase, ascii_upcase
// and tostring (.payload.a |= ascii_downcase) and deletions
// (del(.payload.a, .headers.h)), of the payload's members and of headers,
// where no path is another's prefix and no path read is written. They
// deliver what gojq delivers, byte for byte (a differential fuzz test runs
// both); a record on which they would not (a path through a value that is
// not an object, an update of a missing or non-string value, a payload
// that is not JSON, an escaped string to change) runs on gojq, with gojq's
// result or error. Every other program runs on gojq. With
// Options.KeepLayout the fast path keeps the payload's bytes but for what
// the program changes (the same JSON value, not gojq's bytes), cheaper
// still: a change of members that are there takes one scan of the payload
// and is made in place when the new values keep their lengths (restore
// --jq-keep-layout, a job's Spec.JQKeepLayout). JQ.Apply lets a Restorer run the program on several goroutines
// ahead of the deliveries (dlqdump.RunOptions.TransformWorkers).
package transform
