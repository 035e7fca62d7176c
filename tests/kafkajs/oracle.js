// The real kafkajs partitioners as an oracle for streamapp (tests/test_oracle_kafkajs.py).
//
// Usage: node oracle.js KEYS_FILE PARTITION_COUNTS OUT_FILE
// KEYS_FILE has one hex key per line (an empty line is the empty key). For each key
// OUT_FILE gets: legacy murmur2 (signed), default murmur2 (signed), then for each count n
// the partition of kafkajs' LegacyPartitioner and of its DefaultPartitioner (public API).
'use strict'
const fs = require('fs')
const { Partitioners } = require('kafkajs')
const legacyMurmur2 = require('kafkajs/src/producer/partitioners/legacy/murmur2')
const defaultMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2')

const [keysFile, countText, outFile] = process.argv.slice(2)
const counts = countText.split(',').map(Number)
const metadata = counts.map(n => Array.from({ length: n }, (_, i) => ({ partitionId: i, leader: 0 })))
const legacy = Partitioners.LegacyPartitioner()
const java = Partitioners.DefaultPartitioner()
const topic = 'oracle'

const lines = fs.readFileSync(keysFile, 'ascii').split('\n')
if (lines[lines.length - 1] === '') lines.pop()
const out = lines.map(line => {
  const key = Buffer.from(line, 'hex')
  const row = [legacyMurmur2(key), defaultMurmur2(key)]
  metadata.forEach(partitionMetadata => {
    row.push(legacy({ topic, partitionMetadata, message: { key } }))
    row.push(java({ topic, partitionMetadata, message: { key } }))
  })
  return row.join(' ')
})
fs.writeFileSync(outFile, out.join('\n') + '\n')
