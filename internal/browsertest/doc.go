// Package browsertest drives the consoles' pages in headless Chromium for
// their tests (cron/console and scheduler/console): a [Tab] is one
// browser with a profile of its own (so cookies of its own) and one tab,
// whose steps fail the test with the page's address and HTML, and which
// saves screenshots of the pages. The browser is the one
// internal/testenv finds (Debian's Chromium; ./test.sh installs it).
package browsertest
