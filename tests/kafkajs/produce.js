// The real kafkajs producer as a topic writer for the doctor's tests (tests/test_doctor_writers.py).
//
// Usage: node produce.js BOOTSTRAP TOPIC default|legacy RECORDS_FILE
// RECORDS_FILE has one "KEYHEX VALUEHEX" a line. Each record is sent with kafkajs'
// DefaultPartitioner (2.x, Java compatible) or its LegacyPartitioner (1.x), acks=-1;
// prints "partition offset" per record, as the broker acknowledged it.
'use strict'
const fs = require('fs')
const { Kafka, Partitioners, logLevel } = require('kafkajs')

const [bootstrap, topic, which, recordsFile] = process.argv.slice(2)
const createPartitioner = { default: Partitioners.DefaultPartitioner, legacy: Partitioners.LegacyPartitioner }[which]
if (!createPartitioner) {
  console.error(`partitioner must be default or legacy, got ${which}`)
  process.exit(2)
}
const messages = fs.readFileSync(recordsFile, 'ascii').split('\n').filter(line => line).map(line => {
  const [key, value] = line.split(' ')
  return { key: Buffer.from(key, 'hex'), value: Buffer.from(value, 'hex') }
})

async function main () {
  const kafka = new Kafka({ clientId: 'streamapp-doctor-test', brokers: bootstrap.split(','), logLevel: logLevel.ERROR })
  const producer = kafka.producer({ createPartitioner })
  await producer.connect()
  const out = []
  try {
    // One send per record, so each record's partition and offset are reported in order.
    for (const message of messages) {
      const [meta] = await producer.send({ topic, acks: -1, messages: [message] })
      out.push(`${meta.partition} ${meta.baseOffset}`)
    }
  } finally {
    await producer.disconnect()
  }
  process.stdout.write(out.join('\n') + '\n')
}

main().catch(err => { console.error(err.message); process.exit(1) })
