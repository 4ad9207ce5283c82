// Package changelog is the change log of a dlqdump store: who changed what in
// it, when and why. Every process that changes a store (the dlqdump command,
// the web console, a program using the jobs or Restorer APIs) appends an
// Entry for each change it makes (a job created, paused, resumed, cancelled
// or retried; quarantined segments released; records replayed or discarded;
// segments pruned, moved, rewrapped or summarized), and anyone reads it back
// with `dlqdump log LOCATION`, the console's Log page, or Log.Entries.
//
// The log lives in the store, beside the segments, as a table of small
// records (sink.Tables): it survives restarts and is shared by every
// process on the store. Its entries are kept in pages of up to 64 entries,
// one record each, changed only by compare-and-swap: an appender reads the
// last page, adds its entry and writes the page back if nobody changed it
// meanwhile, and starts the next page (create-if-absent) when the last one is
// full. Concurrent appenders in many processes therefore never fork the log
// and never lose an entry: the loser of a race reads the page again and
// appends after the winner. An append whose write took effect but reported
// failure is recognised on its retry by the entry's nonce, so it is never
// appended twice.
//
// The log is tamper-evident: each entry holds the SHA-256 hash of the entry
// before it and a hash of its own contents, so changing or removing an entry
// breaks the chain at that entry, which Log.Verify (`dlqdump log --verify`)
// names. A chain proves nothing about its own end: whoever can write the
// store can cut its newest entries, or rewrite every entry after the one
// changed. Keep the head Verify reports (its sequence number and hash)
// somewhere else, e.g. a ticket or a monitoring system, and verify later
// with VerifyOptions.Anchor: an anchored entry that changed or went missing
// is then found too.
package changelog
