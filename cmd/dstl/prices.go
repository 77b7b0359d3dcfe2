package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The list prices dstl cost uses by default, as the providers published
// them for their standard tier in one region each, in US dollars, dated
// 2026-11-30 (docs/COST.md names the pages and which
// figures were checked against them on that date). Requests are
// priced per request; storage per GiB-month (2^30 bytes kept for a month:
// the providers' "GB" is 2^30 bytes and a month's storage is its average).
// DELETE is free on all three. Override any figure with --price or --prices.
//
//	AWS S3 Standard, US East (N. Virginia), us-east-1:
//	  PUT, COPY, POST, LIST $0.005 per 1,000; GET $0.0004 per 1,000;
//	  storage (first 50 TB) $0.023 per GB-month
//	Google Cloud Storage Standard, Iowa, us-central1:
//	  Class A (insert, list) $0.005 per 1,000; Class B (get) $0.0004 per 1,000;
//	  storage $0.020 per GB-month
//	Azure Blob Storage, block blobs, Hot, LRS, East US:
//	  write $0.055 per 10,000; list $0.055 per 10,000; read $0.0044 per 10,000;
//	  storage (first 50 TB) $0.018 per GB-month
//	  (the figures of the summary of Azure's page docs/COST.md cites, the
//	  one source of that date for them)
const pricesDate = "2026-11-30"

// price is what a provider charges for each kind of request and for
// storage.
type price struct {
	Key      string  `json:"key"`       // the name --price uses: s3, gcs, azure
	Name     string  `json:"name"`      // the service and tier
	Region   string  `json:"region"`    // the region the prices are of
	Put      float64 `json:"put"`       // USD per PUT (write) request
	Get      float64 `json:"get"`       // USD per GET (read) request
	List     float64 `json:"list"`      // USD per LIST request (one page of a listing)
	Delete   float64 `json:"delete"`    // USD per DELETE request
	Storage  float64 `json:"storage"`   // USD per GiB-month
	ListPage int     `json:"list_page"` // objects per page of a listing
}

// defaultPrices returns the built-in price table (see pricesDate).
func defaultPrices() []price {
	return []price{
		{Key: "s3", Name: "AWS S3 Standard", Region: "us-east-1 (N. Virginia)",
			Put: 0.005 / 1000, Get: 0.0004 / 1000, List: 0.005 / 1000, Delete: 0, Storage: 0.023, ListPage: 1000},
		{Key: "gcs", Name: "GCS Standard", Region: "us-central1 (Iowa)",
			Put: 0.005 / 1000, Get: 0.0004 / 1000, List: 0.005 / 1000, Delete: 0, Storage: 0.020, ListPage: 1000},
		{Key: "azure", Name: "Azure Blob Hot LRS", Region: "East US",
			Put: 0.055 / 10000, Get: 0.0044 / 10000, List: 0.055 / 10000, Delete: 0, Storage: 0.018, ListPage: 5000},
	}
}

// priceFields are the figures of a price that --price and --prices set.
var priceFields = []string{"put", "get", "list", "delete", "storage"}

// field returns a pointer to the figure of p named name.
func (p *price) field(name string) *float64 {
	switch name {
	case "put":
		return &p.Put
	case "get":
		return &p.Get
	case "list":
		return &p.List
	case "delete":
		return &p.Delete
	case "storage":
		return &p.Storage
	}
	return nil
}

// parsePriceValue parses a price: a number of US dollars, or a number over a
// count ("0.005/1000": $0.005 per 1,000 requests). A leading "$" is
// accepted.
func parsePriceValue(s string) (float64, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "$")
	num, den, per := strings.Cut(t, "/")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a price (want dollars, e.g. 0.000005 or 0.005/1000)", s)
	}
	if per {
		d, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(den), ",", ""), 64)
		if err != nil || d <= 0 || math.IsInf(d, 0) {
			return 0, fmt.Errorf("%q is not a price: %q is no positive count", s, den)
		}
		v /= d
	}
	return v, nil
}

// setPrice applies one override, "PROVIDER.FIELD=VALUE", to prices.
func setPrice(prices []price, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("%q: want PROVIDER.FIELD=PRICE, e.g. s3.put=0.005/1000", kv)
	}
	provider, field, ok := strings.Cut(strings.TrimSpace(k), ".")
	if !ok {
		return fmt.Errorf("%q: want PROVIDER.FIELD=PRICE, e.g. s3.put=0.005/1000", kv)
	}
	i := slices.IndexFunc(prices, func(p price) bool { return p.Key == provider })
	if i < 0 {
		return fmt.Errorf("%q: unknown provider %q (want s3, gcs or azure)", kv, provider)
	}
	f := prices[i].field(field)
	if f == nil {
		return fmt.Errorf("%q: unknown field %q (want %s)", kv, field, strings.Join(priceFields, ", "))
	}
	x, err := parsePriceValue(v)
	if err != nil {
		return fmt.Errorf("%q: %w", kv, err)
	}
	*f = x
	return nil
}

// loadPrices applies the overrides of a JSON file to prices: an object
// whose keys are providers (s3, gcs, azure) and whose values are objects of
// fields (put, get, list, delete, storage), each a number of dollars or a
// string that --price takes:
//
//	{"s3": {"put": "0.005/1000", "storage": 0.021}, "azure": {"get": "0.005/10000"}}
func loadPrices(prices []price, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, provider := range slices.Sorted(maps.Keys(m)) {
		for _, field := range slices.Sorted(maps.Keys(m[provider])) {
			raw := m[provider][field]
			var v string
			var n float64
			if string(bytes.TrimSpace(raw)) == "null" { // decodes as no number and no string, without an error
				return fmt.Errorf("%s: %s.%s: want a number or a string, got null", path, provider, field)
			}
			if err := json.Unmarshal(raw, &n); err == nil {
				v = strconv.FormatFloat(n, 'g', -1, 64)
			} else if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("%s: %s.%s: want a number or a string, got %s", path, provider, field, raw)
			}
			if err := setPrice(prices, provider+"."+field+"="+v); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return nil
}
