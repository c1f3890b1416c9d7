package cmdflag

import "testing"

func TestNoArgs(t *testing.T) {
	if err := NoArgs(nil); err != nil {
		t.Fatal(err)
	}
	err := NoArgs([]string{"2s", "x"})
	if err == nil || err.Error() != `unexpected argument "2s" (every setting is a flag: -h lists them)` {
		t.Fatalf("got %v", err)
	}
}

func TestNames(t *testing.T) {
	known := []string{"noop", "ratedb", "envoy"}
	for _, tc := range []struct{ list, want string }{
		{"noop", ""},
		{"envoy,noop,ratedb", ""},
		{"noop,nope", `-targets: unknown target "nope" (want some of noop, ratedb, envoy)`},
		{"noop,", `-targets: unknown target "" (want some of noop, ratedb, envoy)`},
		{"ratedb,noop,ratedb", "-targets names ratedb twice"},
	} {
		err := Names("targets", tc.list, known)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Names(%q) = %q, want %q", tc.list, got, tc.want)
		}
	}
}
