// Command benchnode is the fast upstream of bench/proxy.sh: it answers
// every request with a small body, as cheaply as net/http allows.
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18080", "address")
	flag.Parse()
	body := []byte(`{"ok":true}`)
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})))
}
