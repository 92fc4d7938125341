// Package jobfuzz builds [cron.Job] values from fuzz input, for the tests
// that hold every codec of a job to cron.Job's own JSON form (the JSON
// store's encoder and decoders, the REST API's decoder).
//
// [Fill] sets the fields of a Job by reflection, so a field added to
// cron.Job is filled too, and a codec that does not carry it fails those
// tests. A field of a kind Fill does not know makes it panic, naming the
// field: teach it the new kind.
package jobfuzz
