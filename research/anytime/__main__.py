from research.anytime.cli import main

main()
