// Command echo is a callback endpoint for trying ksana: it answers 200 to
// any request, GET or POST or another method, and prints what it received
// (method, path, the X-Ksana-* headers and the body), one block per
// request. The walkthrough of docs/ksana.md uses it as the server the
// jobs call.
//
//	go run ./examples/echo              # listens on 127.0.0.1:8000
//	go run ./examples/echo -addr :9000
package main
