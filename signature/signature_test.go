package signature_test

import (
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/signature"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"payment gateway timeout after 137ms", "payment gateway timeout after <num>ms"},
		{"payment gateway timeout after 2041ms", "payment gateway timeout after <num>ms"},
		{"order ord-0777777 not found", "order ord-<num> not found"},
		{"event evt_d452f5f6de33405d rejected", "event evt_<hex> rejected"},
		{"user 5048945 has no card ending 4242", "user <num> has no card ending <num>"},
		{`field "email" is invalid: 'x@y'`, "field <str> is invalid: <str>"},
		{"can't parse 'amount': got 12.50", "can't parse <str>: got <num>"},
		{"dial tcp 10.0.3.17:5432: connect: connection refused", "dial tcp <ip>: connect: connection refused"},
		{"dial tcp [fe80::1%eth0]:443: i/o timeout", "dial tcp [<ip>%eth<num>]:<num>: i/o timeout"},
		{"dial tcp [2001:db8::7]:443: i/o timeout", "dial tcp <ip>: i/o timeout"},
		{"lookup db.internal:5432 failed", "lookup <addr> failed"},
		{"Post \"https://api.example.com/v1/pay?id=7\": EOF", "Post <str>: EOF"},
		{"GET https://api.example.com/v1/orders/77 returned 503", "GET <url> returned <num>"},
		{"no account for e.Dubois15@shop.example.org", "no account for <email>"},
		{"request 3f2c7d1e-5b8a-40c4-92e1-aa00bb11cc22 failed", "request <uuid> failed"},
		{"segfault at 0x7ffd3a2c", "segfault at <hex>"},
		{"checksum a1b2c3d4e5f6 mismatch", "checksum <hex> mismatch"},
		{"deadline   exceeded\n\tretry  3", "deadline exceeded retry <num>"},
		{"at 12:30:45 the job ran", "at <num>:<num>:<num> the job ran"},
		{"mac 00:1a:2b:3c:4d:5e down", "mac <ip> down"},
		{"v1.2.3 is too old", "v<num>.<num> is too old"},
		{"user123 and e2e", "user<num> and e<num>e"},
		{"", ""},
		{"deadbeef cafe", "deadbeef cafe"},
	} {
		got := signature.Of(tc.in)
		if got != tc.want {
			t.Errorf("Of(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := signature.Of(got); again != got {
			t.Errorf("Of(%q) = %q, not idempotent", got, again)
		}
	}
	long := signature.Of(strings.Repeat("é", 400))
	if len(long) > signature.MaxLen+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("a long message: %d bytes: %q", len(long), long)
	}
}

func FuzzOf(f *testing.F) {
	for _, s := range []string{"payment gateway timeout after 137ms", `a "b" 'c' 10.0.0.1:80 [::1]:3 x@y.io http://h/p 0xff`, "é\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := signature.Of(s)
		if len(g) > signature.MaxLen+len("…") {
			t.Fatalf("%d bytes", len(g))
		}
		if len(g) < signature.MaxLen && signature.Of(g) != g {
			t.Fatalf("Of(%q) = %q, Of of that %q", s, g, signature.Of(g))
		}
	})
}

func BenchmarkOf(b *testing.B) {
	msgs := []string{"payment gateway timeout after 137ms", "dial tcp 10.0.3.17:5432: connect: connection refused",
		"order ord-0777777 of e.Dubois15@shop.example.org rejected: \"card declined\"", "deadline exceeded"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = signature.Of(msgs[i%len(msgs)])
	}
}
