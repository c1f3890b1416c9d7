package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
)

// Limit every client to 100 requests per minute, counted once for all the
// instances of a service that share one Redis. (Not run: it needs a Redis
// server.)
func ExampleNew() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // lets the Store bound calls without a goroutine each
	})
	defer client.Close()
	store, err := redisstore.New(client, nil) // Prefix "ratedb:", Timeout 50 ms, ServerClock
	if err != nil {
		log.Fatal(err)
	}
	perMinute, err := store.Window(ratedb.FixedWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	r, err := perMinute.Hit(context.Background(), "client-42", 100, 1)
	switch {
	case errors.Is(err, ratedb.ErrUnavailable):
		fmt.Println("no decision: Redis did not answer; fail open or closed")
	case err != nil:
		log.Fatal(err)
	case !r.Allowed:
		fmt.Println("over the limit, retry in", r.RetryAfter)
	default:
		fmt.Println("allowed,", r.Remaining, "left until", r.ResetAt)
	}
}

// A Layered limiter on a Redis Cluster: all tiers of a key live in one key
// whose hash tag is the user key, so each call touches one slot.
func ExampleStore_Layered() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	store, err := redisstore.New(client, &redisstore.Options{Prefix: "login:"})
	if err != nil {
		log.Fatal(err)
	}
	login, err := store.Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Minute, Limit: 1},
		ratedb.Tier{Scale: time.Hour, Limit: 10},
	)
	if err != nil {
		log.Fatal(err)
	}
	r, err := login.Hit(context.Background(), "alice@example.com", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Allowed, r.Tier)
}
