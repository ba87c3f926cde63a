from kafka_chaos.cli import app

app(prog_name="kafka-chaos")
