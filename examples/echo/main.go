package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "address to listen on")
	flag.Parse()
	fmt.Fprintf(os.Stderr, "echo: listening on http://%s/\n", *addr)
	if err := http.ListenAndServe(*addr, newHandler(os.Stdout)); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

// maxBody is how much of a request body is printed.
const maxBody = 4096

// newHandler answers 200 to every request and prints it to out.
func newHandler(out io.Writer) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s\n", time.Now().Format("15:04:05.000"), r.Method, r.URL.RequestURI())
		var names []string
		for k := range r.Header {
			if strings.HasPrefix(k, "X-Ksana-") || k == "Content-Type" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "  %s: %s\n", k, r.Header.Get(k))
		}
		if len(body) > 0 {
			fmt.Fprintf(&b, "  body: %s\n", body)
		}
		mu.Lock()
		io.WriteString(out, b.String())
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
}
