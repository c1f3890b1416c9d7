// Command httpserver is the README's HTTP middleware example as a complete
// program: at most 2 requests per minute per client IP on /hello, /healthz
// exempt, counted in a file so that the quota survives a restart.
//
// It shuts down gracefully on SIGINT or SIGTERM: the server stops accepting
// requests and finishes those in flight, then the DB is closed, which writes
// the final snapshot. Without that last step a deploy loses the counts since
// the last periodic snapshot (up to a second of them).
//
//	go run ./examples/httpserver -addr :8080 -db limits.db
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
)

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	path := flag.String("db", "limits.db", "database file")
	window := flag.Duration("window", time.Minute, "window length (2 requests per window)")
	flag.Parse()
	if err := run(*addr, *path, *window); err != nil {
		log.Fatal(err)
	}
}

func run(addr, path string, window time.Duration) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := ratedb.Open(path, nil)
	if err != nil {
		return err
	}
	defer func() { // after the server has stopped: Close writes the final snapshot
		err = errors.Join(err, db.Close())
	}()
	perWindow, err := db.Window(ratedb.FixedWindow, window)
	if err != nil {
		return err
	}
	limit, err := httplimit.New(httplimit.Window(perWindow, 2), &httplimit.Options{
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: limit.Handler(mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Println("listening on", ln.Addr())

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done(): // SIGINT or SIGTERM
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	fmt.Println("stopped")
	return nil
}
