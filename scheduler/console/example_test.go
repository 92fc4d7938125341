package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/scheduler/console"
)

// A dispatch instance in memory with its console mounted at /ui/. Signed
// in with the read token, an operator sees every page; the admin token
// may also requeue and delete dead letters.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := scheduler.Config{InstanceID: "a"}
	stores, err := scheduler.NewMemStores(cfg)
	if err != nil {
		panic(err)
	}
	d, err := scheduler.NewDispatcher(stores, cfg)
	if err != nil {
		panic(err)
	}
	go d.Run(ctx)

	c, err := console.New(d, console.Config{
		ReadToken:  "a-read-token-of-16-bytes-or-more",
		AdminToken: "an-admin-token-of-16-bytes-or-more",
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(srv.URL + "/ui/")
	if err != nil {
		panic(err)
	}
	res.Body.Close()
	fmt.Println(res.StatusCode, res.Header.Get("Location"))
	// Output:
	// 303 /ui/login
}
