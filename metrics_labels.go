package dlqdump

// FailReasons are the reasons a Queue and a Restorer call MetricsWriter.Fail
// with: a Queue's refused Enqueue calls (those of QueueStats.Refused:
// "closed", "encode", "too_large", "backpressure"), its failed writes
// ("write", "recover", "not_durable", "shutdown"), and a Restorer's
// segments it could not restore as they were ("corrupt",
// "version_deleted", "unauthenticated_progress", "not_a_copy", "no_key"),
// and those it claimed and found moved ("moved_away") or removed ("gone")
// by someone without their claim.
// A MetricsWriter may create a series for each up front, so that an alert
// on its increase sees the first one.
var FailReasons = []string{
	"closed", "encode", "too_large", "backpressure",
	"write", "recover", "not_durable", "shutdown",
	"corrupt", "version_deleted", "unauthenticated_progress", "not_a_copy", "no_key",
	"moved_away", "gone",
}

// QuarantineReasons are the reasons a Restorer calls
// MetricsWriter.Quarantine with: records the destination refused
// MaxAttempts times ("refused"), that do not decode ("decode"), replayed
// MaxReplays times ("replays"), and whole segments of another Version
// ("version"), damaged ("damaged"), whose progress cannot be trusted
// ("progress"), not encrypted under RequireEncrypted ("unencrypted") or
// holding a block larger than Config.MaxRecordSize allows ("too_large"),
// and records a RunOptions.Transform refused ("transform"). A discard
// (RunOptions.Discard) is counted as DiscardLabel.
var QuarantineReasons = []string{"refused", "decode", "replays", "version", "damaged", "progress", "unencrypted", "too_large", "transform", DiscardLabel}

// DiscardLabel is the MetricsWriter.Quarantine reason of records a person
// discarded (RunOptions.Discard).
const DiscardLabel = "discarded"
