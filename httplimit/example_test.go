package httplimit_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
)

// A complete server: at most 2 requests per minute per client IP, the health
// check exempt. The clock is fixed so that the output is deterministic; a
// real server leaves Clock unset in both Options.
func Example() {
	now := time.Date(2026, 1, 1, 12, 0, 15, 0, time.UTC)
	clock := func() time.Time { return now }

	db, err := ratedb.Open("", &ratedb.Options{Clock: clock}) // "": in memory; give a path to keep counts across restarts
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	perMinute, err := db.Window(ratedb.FixedWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	limit, err := httplimit.New(httplimit.Window(perMinute, 2), &httplimit.Options{
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
		Clock:  clock,
	})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })

	// In production: an http.Server with limit.Handler(mux) (or
	// r.Use(limit.Handler) with chi), shut down gracefully on SIGTERM before
	// db.Close, as examples/httpserver does.
	srv := httptest.NewServer(limit.Handler(mux))
	defer srv.Close()

	for _, path := range []string{"/hello", "/hello", "/hello", "/healthz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header
		fmt.Printf("%s: %d %q limit=%s remaining=%s reset=%s policy=%s retry-after=%s\n",
			path, resp.StatusCode, body,
			h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"),
			h.Get("RateLimit-Policy"), h.Get("Retry-After"))
	}
	// Output:
	// /hello: 200 "hello" limit=2 remaining=1 reset=45 policy=2;w=60 retry-after=
	// /hello: 200 "hello" limit=2 remaining=0 reset=45 policy=2;w=60 retry-after=
	// /hello: 429 "Too Many Requests\n" limit=2 remaining=0 reset=45 policy=2;w=60 retry-after=45
	// /healthz: 200 "ok" limit= remaining= reset= policy= retry-after=
}

// A login endpoint that limits failed attempts: at most 3 a minute per
// client IP. Undo gives back every request that did not fail, so a user who
// logs in successfully never uses the quota.
func Example_countOnlyFailures() {
	now := time.Date(2026, 1, 1, 12, 0, 15, 0, time.UTC)
	clock := func() time.Time { return now }
	db, err := ratedb.Open("", &ratedb.Options{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	perMinute, err := db.Window(ratedb.FixedWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	limit, err := httplimit.New(httplimit.Window(perMinute, 3), &httplimit.Options{
		Undo:  func(_ *http.Request, status int) bool { return status < 400 },
		Clock: clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("password") != "secret" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "welcome")
	})
	srv := httptest.NewServer(limit.Handler(login))
	defer srv.Close()

	for _, password := range []string{"secret", "secret", "guess1", "guess2", "secret", "guess3", "secret"} {
		resp, err := http.Get(srv.URL + "/login?password=" + password)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(password, resp.StatusCode)
	}
	// Output:
	// secret 200
	// secret 200
	// guess1 401
	// guess2 401
	// secret 200
	// guess3 401
	// secret 429
}
