package main

// jobsOneStore is the section of BENCHMARKS.md on many restore jobs over
// one store (issue 28), measured by the root module's dlqdump-bench, not
// by this program: it is kept here so that a regenerated document keeps
// it. Update it when it is measured again.
const jobsOneStore = `## Restore jobs over one store

` + "`go run ./cmd/dlqdump-bench jobs one-store -runs 3`" + ` (from the repository's root): 30 restore jobs, job K
` + "`--where batch=K --rate 200`" + ` over its 400 records of one 12,000-record store of 71 segments (170 records
each, BlockSize 16 KiB, so each segment holds records of two batches), all due at one second, run by 3
runners of 4 Restorers on a directory. *duration*: a job's start to its end (the ideal is 400 / 200 =
2 s); *due to end*: when it was due to its end; *passes*: the jobs' Attempts in all; *read and left*:
the records the passes read and did not select (the jobs' Skipped); *bytes read*: the segments' bytes
read, planning included, over the store's size. Range of three runs each, before (main at dd27a8c) and
after taken in turn, on the 2-core machine while it was quiet (load under 1), and while it was shared
(load 19 to 22).

| | duration p50 | p90 | max | due to end p50 | p90 | passes (most for one job) | read and left | bytes read |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| before, quiet (a job meeting a segment another holds ends its pass; each pass plans every segment) | 2.03–2.05 s | 2.08–2.10 s | 2.10–2.94 s | 4.08–4.12 s | 6.08–6.14 s | 31–43 (2 to 12) | 2,040–2,230 | 58–62× |
| after, quiet (the pass waits for held segments at its end; a Restorer plans a segment once) | 2.02–2.03 s | 2.05–2.08 s | 2.08–2.12 s | 4.07–4.08 s | 6.08–6.09 s | 30 (1) | 2,310–2,630 | 17.7× |
| before, shared | 2.51–2.58 s | 2.75–3.15 s | 3.15–3.60 s | 4.96–5.50 s | 7.37–7.75 s | 32–34 (2) | 2,110–2,640 | 57–59× |
| after, shared | 2.31–2.36 s | 2.45–2.98 s | 2.46–3.31 s | 4.75–5.17 s | 7.03–7.29 s | 30 (1) | 2,010–2,270 | 17.7× |

From when a job was due, the 12 Restorers run 12 jobs at a time: the last 6 of the 30 start after two
rounds, so the p90 is about three jobs' time whatever a job costs.

`
